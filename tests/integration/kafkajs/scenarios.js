#!/usr/bin/env node
// kafkajs compatibility scenarios for kafkalite, run by tests/integration/test_kafkajs.py.
//
//   node scenarios.js <bootstrap host:port> <scenario> [<suffix>]
//
// Each scenario prints exactly one JSON object on stdout (its observations) and exits 0, or prints
// {"error": ...} and exits 1. kafkajs's own log goes to stderr (level from KAFKAJS_LOG_LEVEL,
// default WARN). Topic and group names end in <suffix> so that runs never collide. Every wait has
// a deadline (DEADLINE_MS); nothing sleeps to synchronise.
'use strict'

const {
  Kafka,
  logLevel,
  CompressionTypes,
  ConfigResourceTypes,
  AssignerProtocol,
} = require('kafkajs')

const [bootstrap, scenario, suffixArg] = process.argv.slice(2)
const suffix = suffixArg || `${process.pid}-${Date.now()}`
const DEADLINE_MS = Number(process.env.SCENARIO_DEADLINE_MS || 25000)
const LEVEL = logLevel[(process.env.KAFKAJS_LOG_LEVEL || 'WARN').toUpperCase()] ?? logLevel.WARN

const stderrLogCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId: `kafkalite-compat-${scenario}`,
  brokers: [bootstrap],
  logLevel: LEVEL,
  logCreator: stderrLogCreator,
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
})

// Group timings that keep a rebalance to well under a second (the test broker runs with
// group.initial.rebalance.delay.ms=0 and group.min.session.timeout.ms=1000).
const FAST_GROUP = { sessionTimeout: 6000, rebalanceTimeout: 10000, heartbeatInterval: 300, maxWaitTimeInMs: 200 }
// kafkajs wants unlimited retries for idempotent and transactional producers (it warns otherwise);
// the scenario deadline bounds them.
const EOS_RETRY = { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 1000 }

// ------------------------------------------------------------------------------------------ helpers
function withDeadline(promise, what, ms = DEADLINE_MS) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** A promise with its resolve function exposed, for "this condition became true" signals. */
function signal() {
  let resolve
  const promise = new Promise(r => { resolve = r })
  return { promise, resolve }
}

function decodeHeaders(headers) {
  const out = {}
  for (const [name, value] of Object.entries(headers || {})) {
    out[name] = Array.isArray(value) ? value.map(v => v.toString()) : value && value.toString()
  }
  return out
}

function recordOf(topic, partition, message) {
  return {
    topic,
    partition,
    offset: Number(message.offset),
    key: message.key === null ? null : message.key.toString(),
    value: message.value === null ? null : message.value.toString(),
    headers: decodeHeaders(message.headers),
    timestamp: Number(message.timestamp),
  }
}

async function createTopic(admin, topic, numPartitions, configEntries = []) {
  return admin.createTopics({
    topics: [{ topic, numPartitions, replicationFactor: 1, configEntries }],
    waitForLeaders: true,
    timeout: 10000,
  })
}

/**
 * Consume `topic` with one (or several) consumers of `groupId` until `expected` records arrived,
 * then disconnect them (kafkajs commits the resolved offsets on disconnect). With several members
 * it also waits for a balanced generation: every member holding a non-empty share and the shares
 * partitioning all `partitions` (an early member may consume everything before the others join).
 * Returns the records and that balanced assignment (kafkajs reports one on each GROUP_JOIN).
 * `afterBalanced` runs once the assignment is balanced (e.g. to produce only then, so that every
 * record is consumed by the member that owns its partition in that generation).
 */
async function consumeGroup({ topic, groupId, expected, members = 1, partitions = 3, consumerOptions = {}, autoCommit = true,
                              afterBalanced = null }) {
  const records = []
  const done = signal()
  const balanced = signal()
  const consumers = []
  const latest = new Array(members).fill(null)
  let snapshot = null
  const checkBalanced = () => {
    if (snapshot || latest.some(a => !a || a.partitions.length === 0)) return
    const all = latest.flatMap(a => a.partitions)
    if (new Set(all).size === all.length && all.length === partitions) {
      snapshot = latest.map(a => ({ ...a, partitions: [...a.partitions].sort((x, y) => x - y) }))
      balanced.resolve()
    }
  }
  for (let i = 0; i < members; i++) {
    const consumer = kafka.consumer({ groupId, ...FAST_GROUP, ...consumerOptions })
    consumers.push(consumer)
    consumer.on(consumer.events.GROUP_JOIN, event => {
      latest[i] = { memberId: event.payload.memberId, isLeader: event.payload.isLeader,
                    partitions: event.payload.memberAssignment[topic] || [] }
      checkBalanced()
    })
  }
  try {
    for (const [i, consumer] of consumers.entries()) {
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit,
        autoCommitInterval: 100,
        eachMessage: async ({ topic: t, partition, message }) => {
          records.push({ member: i, ...recordOf(t, partition, message) })
          if (records.length >= expected) done.resolve()
        },
      })
    }
    if (expected === 0) done.resolve()
    await withDeadline(balanced.promise, `a balanced assignment of ${partitions} partitions over ${members} member(s) of ${groupId}`)
    if (afterBalanced) await afterBalanced()
    await withDeadline(done.promise, `${expected} records from ${topic} (got ${records.length})`)
  } finally {
    for (const consumer of consumers) await consumer.disconnect()
  }
  return { records, assignments: snapshot }
}

// ---------------------------------------------------------------------------------------- scenarios
const scenarios = {}

scenarios.admin = async () => {
  const admin = kafka.admin()
  await admin.connect()
  const topic = `kjs-admin-${suffix}`
  const result = {}
  try {
    result.cluster = await admin.describeCluster()
    result.created = await createTopic(admin, topic, 3, [
      { name: 'retention.ms', value: '123456' },
      { name: 'cleanup.policy', value: 'compact' },
    ])
    result.createdAgain = await createTopic(admin, topic, 3)
    // validateOnly: kafkajs would wait for the (never created) topic's leaders unless told not to.
    result.validateOnly = await admin.createTopics({ validateOnly: true, waitForLeaders: false,
                                                     topics: [{ topic: `${topic}-validate`, numPartitions: 2 }] })
    result.validatedTopicListed = (await admin.listTopics()).includes(`${topic}-validate`)
    result.listedAfterCreate = (await admin.listTopics()).includes(topic)
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    result.metadata = metadata.topics.map(t => ({
      name: t.name,
      partitions: t.partitions.map(p => ({ partitionId: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
        .sort((a, b) => a.partitionId - b.partitionId),
    }))
    const described = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'cleanup.policy', 'segment.bytes'] }],
      includeSynonyms: false,
    })
    result.topicConfigs = described.resources.map(r => ({
      errorCode: r.errorCode, resourceName: r.resourceName, resourceType: r.resourceType,
      entries: Object.fromEntries(r.configEntries.map(e => [e.configName, { value: e.configValue, isDefault: e.isDefault, readOnly: e.readOnly }])),
    }))
    const brokerConfigs = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.BROKER, name: String(result.cluster.brokers[0].nodeId) }],
      includeSynonyms: true,
    })
    result.brokerConfigCount = brokerConfigs.resources[0].configEntries.length
    result.brokerConfigError = brokerConfigs.resources[0].errorCode
    await admin.alterConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '654321' }] }],
    })
    const altered = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }],
      includeSynonyms: false,
    })
    result.retentionAfterAlter = altered.resources[0].configEntries[0].configValue
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
    result.partitionsAfterCreatePartitions = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length
    result.offsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
    await admin.deleteTopics({ topics: [topic], timeout: 10000 })
    result.listedAfterDelete = (await admin.listTopics()).includes(topic)
    // Deleting it again: UNKNOWN_TOPIC_OR_PARTITION, like Kafka. kafkajs counts that code as
    // retriable, so this admin does not retry (it would only repeat the same answer).
    const oneShot = kafka.admin({ retry: { retries: 0 } })
    await oneShot.connect()
    try {
      await oneShot.deleteTopics({ topics: [topic], timeout: 10000 })
      result.deleteAgainError = null
    } catch (error) {
      // kafkajs wraps the broker's error (its cause) once its retries are used up
      result.deleteAgainError = (error.cause && error.cause.type) || error.type || error.name
    } finally {
      await oneShot.disconnect()
    }
  } finally {
    await admin.disconnect()
  }
  return result
}

scenarios.produce = async () => {
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  const topic = `kjs-produce-${suffix}`
  const result = { topic }
  await admin.connect()
  await producer.connect()
  try {
    await createTopic(admin, topic, 3)
    const messages = []
    for (let i = 0; i < 60; i++) {
      messages.push({
        key: `key-${i % 12}`,
        value: `value-${i}-` + 'x'.repeat(i * 20),
        headers: { index: String(i), 'trace-id': `trace-${i}`, multi: ['a', 'b'] },
      })
    }
    // One gzip batch per call; two calls so each partition gets two batches.
    const sent = []
    sent.push(...await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: messages.slice(0, 30) }))
    sent.push(...await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: messages.slice(30) }))
    // An uncompressed batch with a null key and a tombstone-like null value, acks=1.
    sent.push(...await producer.send({ topic, acks: 1, messages: [{ key: null, value: 'no-key' }, { key: 'key-null-value', value: null }] }))
    result.sendResults = sent.map(r => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: r.baseOffset }))
    result.endOffsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
    const { records } = await consumeGroup({ topic, groupId: `kjs-produce-reader-${suffix}`, expected: 62 })
    result.records = records
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.group = async () => {
  const admin = kafka.admin()
  const producer = kafka.producer()
  const topic = `kjs-group-${suffix}`
  const groupId = `kjs-group-${suffix}`
  const result = { topic, groupId }
  await admin.connect()
  await producer.connect()
  try {
    await createTopic(admin, topic, 3)
    // Two members join first; the records are produced once both hold their share.
    const first = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `first-${i}` }))
    const phase1 = await consumeGroup({ topic, groupId, expected: 30, members: 2, afterBalanced: async () => {
      // DescribeGroups of the Stable group: members with their subscription and assignment
      const [group] = (await admin.describeGroups([groupId])).groups
      result.describeWhileStable = {
        state: group.state, protocolType: group.protocolType, protocol: group.protocol,
        members: group.members.map(m => ({
          memberId: m.memberId, clientId: m.clientId,
          subscription: AssignerProtocol.MemberMetadata.decode(m.memberMetadata).topics,
          assignment: AssignerProtocol.MemberAssignment.decode(m.memberAssignment).assignment,
        })),
      }
      await producer.send({ topic, acks: -1, messages: first })
    } })
    result.phase1 = { assignments: phase1.assignments, values: phase1.records.map(r => r.value),
                      records: phase1.records.map(r => ({ member: r.member, partition: r.partition, offset: r.offset })) }
    result.committedAfterPhase1 = (await admin.fetchOffsets({ groupId, topics: [topic] }))
      .flatMap(t => t.partitions).sort((a, b) => a.partition - b.partition)
    result.describeAfterPhase1 = (await admin.describeGroups([groupId])).groups
      .map(g => ({ groupId: g.groupId, state: g.state, protocolType: g.protocolType, members: g.members.length }))
    result.listGroups = (await admin.listGroups()).groups.filter(g => g.groupId === groupId)

    const second = Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `second-${i}` }))
    await producer.send({ topic, acks: -1, messages: second })
    // A new consumer of the same group resumes from the committed offsets: only the second batch.
    const phase2 = await consumeGroup({ topic, groupId, expected: 10 })
    result.phase2 = { values: phase2.records.map(r => r.value), assignments: phase2.assignments }
    result.committedAfterPhase2 = (await admin.fetchOffsets({ groupId, topics: [topic] }))
      .flatMap(t => t.partitions).sort((a, b) => a.partition - b.partition)
    // resetOffsets on the now empty group: kafkajs joins it with a paused consumer of its own and
    // commits through it. (This takes ~5 s: that consumer, its fetches paused, waits its default
    // maxWaitTimeInMs of 5000 ms before it stops; the admin API does not let us lower it.)
    await admin.resetOffsets({ groupId, topic, earliest: true })
    result.committedAfterReset = (await admin.fetchOffsets({ groupId, topics: [topic] }))
      .flatMap(t => t.partitions).sort((a, b) => a.partition - b.partition)
    await admin.deleteGroups([groupId])
    result.listGroupsAfterDelete = (await admin.listGroups()).groups.filter(g => g.groupId === groupId)
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.idempotent = async () => {
  const admin = kafka.admin()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: EOS_RETRY })
  const topic = `kjs-idem-${suffix}`
  const result = { topic }
  await admin.connect()
  await producer.connect()
  try {
    await createTopic(admin, topic, 3)
    const sent = []
    for (let round = 0; round < 5; round++) {
      const messages = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `r${round}-m${i}` }))
      sent.push(...await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages }))
    }
    result.sendResults = sent.map(r => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: r.baseOffset }))
    result.endOffsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
    const { records } = await consumeGroup({ topic, groupId: `kjs-idem-reader-${suffix}`, expected: 100 })
    result.values = records.map(r => r.value)
    result.records = records.map(r => ({ partition: r.partition, offset: r.offset, value: r.value }))
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.transactions = async () => {
  const admin = kafka.admin()
  const transactionalId = `kjs-txn-${suffix}`
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 30000,
                                    retry: EOS_RETRY })
  const topic = `kjs-txn-${suffix}`
  const bigTopic = `kjs-txn-big-${suffix}`
  const offsetsGroup = `kjs-txn-offsets-${suffix}`
  const result = { topic }
  await admin.connect()
  await producer.connect()
  try {
    await createTopic(admin, topic, 3)
    await createTopic(admin, bigTopic, 1)
    const batch = (label, n) => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `${label}-${i}`, headers: { txn: label } }))

    let txn = await producer.transaction()
    await txn.send({ topic, acks: -1, messages: batch('committed', 6) })
    await txn.commit()

    txn = await producer.transaction()
    await txn.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: batch('aborted', 6) })
    await txn.abort()

    // An aborted transaction of several large batches in one partition (with a plain record in
    // between): with fetches smaller than a batch, each response holds one batch, so the aborted
    // transaction must be listed in every response whose range it overlaps.
    const big = 'x'.repeat(3000)
    const plain = kafka.producer()
    await plain.connect()
    try {
      txn = await producer.transaction()
      for (let i = 0; i < 4; i++) await txn.send({ topic: bigTopic, acks: -1, messages: [{ value: `big-aborted-${i}-${big}` }] })
      await plain.send({ topic: bigTopic, acks: -1, messages: [{ value: 'big-plain' }] })
      for (let i = 4; i < 6; i++) await txn.send({ topic: bigTopic, acks: -1, messages: [{ value: `big-aborted-${i}-${big}` }] })
      await txn.abort()
    } finally {
      await plain.disconnect()
    }
    txn = await producer.transaction()
    for (let i = 0; i < 2; i++) await txn.send({ topic: bigTopic, acks: -1, messages: [{ value: `big-committed-${i}-${big}` }] })
    await txn.commit()

    // Consume-transform-produce: offsets of a consumer group committed inside the transaction.
    txn = await producer.transaction()
    await txn.send({ topic, acks: -1, messages: batch('with-offsets', 3) })
    await txn.sendOffsets({ consumerGroupId: offsetsGroup, topics: [{ topic, partitions: [{ partition: 0, offset: '2' }, { partition: 1, offset: '1' }] }] })
    await txn.commit()

    result.endOffsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
    result.txnOffsets = (await admin.fetchOffsets({ groupId: offsetsGroup, topics: [topic] }))
      .flatMap(t => t.partitions).sort((a, b) => a.partition - b.partition)

    const committed = await consumeGroup({ topic, groupId: `kjs-txn-rc-${suffix}`, expected: 9 })
    result.readCommitted = committed.records.map(r => r.value)
    const uncommitted = await consumeGroup({ topic, groupId: `kjs-txn-ru-${suffix}`, expected: 15,
                                             consumerOptions: { readUncommitted: true } })
    result.readUncommitted = uncommitted.records.map(r => r.value)
    const smallFetches = await consumeGroup({ topic: bigTopic, groupId: `kjs-txn-small-${suffix}`, expected: 3, partitions: 1,
                                              consumerOptions: { maxBytesPerPartition: 1024, maxBytes: 1024 } })
    result.bigReadCommittedSmallFetches = smallFetches.records.map(r => ({ offset: r.offset, value: r.value.slice(0, 20) }))
    result.bigEndOffsets = await admin.fetchTopicOffsets(bigTopic)
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.fetch = async () => {
  // Fetch edge cases: acks=0, auto-created topics, records larger than maxBytesPerPartition,
  // ListOffsets by timestamp, seek, DeleteRecords.
  const admin = kafka.admin()
  const producer = kafka.producer()
  const topic = `kjs-fetch-${suffix}`
  const autoTopic = `kjs-auto-${suffix}`
  const result = { topic, autoTopic }
  await admin.connect()
  await producer.connect()
  try {
    await createTopic(admin, topic, 1)
    const t0 = Date.now() - 60000
    const big = 'B'.repeat(64 * 1024)
    const messages = Array.from({ length: 12 }, (_, i) => ({ key: `k${i}`, value: `${i}:` + (i % 3 === 0 ? big : 'small'),
                                                            timestamp: String(t0 + i * 1000) }))
    result.sendAcks0 = await producer.send({ topic, acks: 0, messages: messages.slice(0, 2) })
    await producer.send({ topic, acks: -1, messages: messages.slice(2, 7) })
    await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: messages.slice(7) })
    result.autoCreateSend = (await producer.send({ topic: autoTopic, acks: -1, messages: [{ value: 'auto' }] }))
      .map(r => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: r.baseOffset }))
    result.autoTopicListed = (await admin.listTopics()).includes(autoTopic)
    result.endOffsets = await admin.fetchTopicOffsets(topic)
    result.offsetsByTimestamp = {
      beforeAll: await admin.fetchTopicOffsetsByTimestamp(topic, t0 - 1),
      atFifth: await admin.fetchTopicOffsetsByTimestamp(topic, t0 + 5000),
      afterAll: await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() + 3600000),
    }
    // Small fetch sizes: Kafka still returns the first batch whole (KIP-74) and kafkajs must cope
    // with batches cut at the end of a response.
    const small = await consumeGroup({ topic, groupId: `kjs-fetch-small-${suffix}`, expected: 12, partitions: 1,
                                       consumerOptions: { maxBytesPerPartition: 1024, maxBytes: 2048 } })
    result.smallFetch = small.records.map(r => ({ offset: r.offset, key: r.key, length: r.value.length, timestamp: r.timestamp }))

    // seek: a consumer that seeks to offset 9 right after run() sees only 9..11.
    const seekConsumer = kafka.consumer({ groupId: `kjs-fetch-seek-${suffix}`, ...FAST_GROUP })
    const seen = []
    const gotThree = signal()
    await seekConsumer.connect()
    await seekConsumer.subscribe({ topics: [topic], fromBeginning: true })
    try {
      await seekConsumer.run({ eachMessage: async ({ message }) => {
        seen.push(Number(message.offset))
        if (seen.length >= 3) gotThree.resolve()
      } })
      seekConsumer.seek({ topic, partition: 0, offset: '9' })
      await withDeadline(gotThree.promise, 'three records after seek')
    } finally {
      await seekConsumer.disconnect()
    }
    result.afterSeek = seen

    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
    result.offsetsAfterDeleteRecords = await admin.fetchTopicOffsets(topic)
    const rest = await consumeGroup({ topic, groupId: `kjs-fetch-rest-${suffix}`, expected: 8, partitions: 1 })
    result.afterDeleteRecords = rest.records.map(r => r.offset)
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.openTransaction = async () => {
  // A read_committed consumer stops at the last stable offset while a transaction is open (even a
  // later non-transactional record waits), and gets everything once it commits.
  const admin = kafka.admin()
  const plain = kafka.producer()
  const producer = kafka.producer({ transactionalId: `kjs-open-${suffix}`, idempotent: true, maxInFlightRequests: 1,
                                    retry: EOS_RETRY })
  const topic = `kjs-open-${suffix}`
  const result = { topic }
  await admin.connect()
  await plain.connect()
  await producer.connect()
  const consumer = kafka.consumer({ groupId: `kjs-open-reader-${suffix}`, ...FAST_GROUP })
  try {
    await createTopic(admin, topic, 1)
    await plain.send({ topic, acks: -1, messages: [{ value: 'before-0' }, { value: 'before-1' }] })
    const txn = await producer.transaction()
    await txn.send({ topic, acks: -1, messages: [{ value: 'txn-0' }, { value: 'txn-1' }] })
    await plain.send({ topic, acks: -1, messages: [{ value: 'after-open' }] })
    result.offsetsWhileOpen = await admin.fetchTopicOffsets(topic) // read_committed: high = LSO

    const received = []
    const gotBefore = signal()
    const gotAll = signal()
    let emptyFetchesAtLso = 0
    const idleAtLso = signal()
    consumer.on(consumer.events.FETCH, () => {
      if (received.length >= 2 && ++emptyFetchesAtLso >= 3) idleAtLso.resolve()
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let committing = false
    await consumer.run({ eachMessage: async ({ message }) => {
      received.push({ offset: Number(message.offset), value: message.value.toString(), afterCommitStarted: committing })
      if (received.length >= 2) gotBefore.resolve()
      if (received.length >= 5) gotAll.resolve()
    } })
    await withDeadline(gotBefore.promise, 'the two records before the transaction')
    // Three more fetch round trips at the LSO: records past it would have arrived by now.
    await withDeadline(idleAtLso.promise, 'three fetches at the last stable offset')
    result.receivedWhileOpen = received.map(r => r.value)
    committing = true
    await txn.commit()
    result.offsetsAfterCommit = await admin.fetchTopicOffsets(topic)
    await withDeadline(gotAll.promise, 'every record after the commit')
    result.received = received
  } finally {
    await consumer.disconnect()
    await producer.disconnect()
    await plain.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.exactlyOnce = async () => {
  // Consume-transform-produce: a consumer group member (autoCommit off) processes each input record
  // in a transaction that writes the output and commits the input offset (sendOffsets) while the
  // group is active. Run twice: the second run resumes after the offsets the first one committed.
  const admin = kafka.admin()
  const plain = kafka.producer()
  const input = `kjs-eos-in-${suffix}`
  const output = `kjs-eos-out-${suffix}`
  const groupId = `kjs-eos-${suffix}`
  const result = { input, output, groupId, runs: [] }
  await admin.connect()
  await plain.connect()
  try {
    await createTopic(admin, input, 3)
    await createTopic(admin, output, 3)
    const runOnce = async (expected, label) => {
      const producer = kafka.producer({ transactionalId: `kjs-eos-${suffix}-${label}`, idempotent: true,
                                        maxInFlightRequests: 1, retry: EOS_RETRY })
      await producer.connect()
      const consumer = kafka.consumer({ groupId, ...FAST_GROUP })
      const processed = []
      const done = signal()
      try {
        await consumer.connect()
        await consumer.subscribe({ topics: [input], fromBeginning: true })
        await consumer.run({
          autoCommit: false,
          eachMessage: async ({ topic, partition, message }) => {
            const txn = await producer.transaction()
            try {
              await txn.send({ topic: output, messages: [{ key: message.key, value: `${label}:${message.value}` }] })
              await txn.sendOffsets({ consumerGroupId: groupId,
                                      topics: [{ topic, partitions: [{ partition, offset: String(Number(message.offset) + 1) }] }] })
              await txn.commit()
            } catch (error) {
              await txn.abort()
              throw error
            }
            processed.push(message.value.toString())
            if (processed.length >= expected) done.resolve()
          },
        })
        await withDeadline(done.promise, `${expected} records processed in transactions (${processed.length} so far)`)
      } finally {
        await consumer.disconnect()
        await producer.disconnect()
      }
      return processed
    }
    await plain.send({ topic: input, acks: -1, messages: Array.from({ length: 15 }, (_, i) => ({ key: `k${i}`, value: `a${i}` })) })
    result.runs.push(await runOnce(15, 'first'))
    result.committedAfterFirst = (await admin.fetchOffsets({ groupId, topics: [input] })).flatMap(t => t.partitions)
      .sort((a, b) => a.partition - b.partition)
    await plain.send({ topic: input, acks: -1, messages: Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, value: `b${i}` })) })
    result.runs.push(await runOnce(5, 'second'))
    result.inputEndOffsets = (await admin.fetchTopicOffsets(input)).sort((a, b) => a.partition - b.partition)
    result.committedAfterSecond = (await admin.fetchOffsets({ groupId, topics: [input] })).flatMap(t => t.partitions)
      .sort((a, b) => a.partition - b.partition)
    const out = await consumeGroup({ topic: output, groupId: `kjs-eos-reader-${suffix}`, expected: 20 })
    result.output = out.records.map(r => r.value)
  } finally {
    await plain.disconnect()
    await admin.disconnect()
  }
  return result
}

scenarios.topicConfigs = async () => {
  // Topics whose configs make the broker rewrite batches: compression.type=gzip (kafkajs sends
  // uncompressed batches, the broker recompresses them, also idempotent and transactional ones)
  // and message.timestamp.type=LogAppendTime (the broker stamps its own time).
  const admin = kafka.admin()
  const idempotent = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: EOS_RETRY })
  const transactional = kafka.producer({ transactionalId: `kjs-cfg-${suffix}`, idempotent: true, maxInFlightRequests: 1,
                                         retry: EOS_RETRY })
  const gzipTopic = `kjs-cfg-gzip-${suffix}`
  const appendTimeTopic = `kjs-cfg-lat-${suffix}`
  const result = { gzipTopic, appendTimeTopic }
  await admin.connect()
  await idempotent.connect()
  await transactional.connect()
  try {
    await createTopic(admin, gzipTopic, 1, [{ name: 'compression.type', value: 'gzip' }])
    await createTopic(admin, appendTimeTopic, 1, [{ name: 'message.timestamp.type', value: 'LogAppendTime' }])
    const oldTimestamp = String(Date.now() - 3600 * 1000)
    const messages = label => Array.from({ length: 4 }, (_, i) => ({
      key: i === 3 ? null : `k${i}`, value: i === 2 ? null : `${label}-${i}`, timestamp: oldTimestamp,
      headers: { h: `${label}-${i}`, empty: '' },
    }))
    for (const topic of [gzipTopic, appendTimeTopic]) {
      await idempotent.send({ topic, acks: -1, messages: messages('idem-a') })
      await idempotent.send({ topic, acks: -1, messages: messages('idem-b') })
      let txn = await transactional.transaction()
      await txn.send({ topic, acks: -1, messages: messages('txn-commit') })
      await txn.commit()
      txn = await transactional.transaction()
      await txn.send({ topic, acks: -1, messages: messages('txn-abort') })
      await txn.abort()
      await idempotent.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: messages('idem-gzip') })
    }
    result.sentAfter = Date.now()
    const sentBefore = Number(oldTimestamp)
    result.oldTimestamp = sentBefore
    for (const [name, topic] of [['gzip', gzipTopic], ['appendTime', appendTimeTopic]]) {
      const { records } = await consumeGroup({ topic, groupId: `kjs-cfg-${name}-${suffix}`, expected: 16, partitions: 1 })
      result[name] = records.map(r => ({ offset: r.offset, key: r.key, value: r.value, headers: r.headers, timestamp: r.timestamp }))
    }
  } finally {
    await transactional.disconnect()
    await idempotent.disconnect()
    await admin.disconnect()
  }
  return result
}

/** Print a progress line for the test driver and wait for it to answer with one line on stdin. */
let stdinLines = null
async function checkpoint(name, data = {}) {
  if (!stdinLines) {
    stdinLines = []
    const waiting = []
    let buffered = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', chunk => {
      buffered += chunk
      let newline
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        if (waiting.length) waiting.shift()(line); else stdinLines.push(line)
      }
    })
    stdinLines.next = () => stdinLines.length ? Promise.resolve(stdinLines.shift()) : new Promise(r => waiting.push(r))
  }
  process.stdout.write(JSON.stringify({ checkpoint: name, ...data }) + '\n')
  const answer = await withDeadline(stdinLines.next(), `the driver's answer to checkpoint ${name}`)
  return answer
}

scenarios.brokerRestart = async () => {
  // A group member, an idempotent producer and a transactional producer stay connected while the
  // driver restarts the broker (same port) at the checkpoint; all of them carry on afterwards.
  const admin = kafka.admin()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: EOS_RETRY })
  const txnProducer = kafka.producer({ transactionalId: `kjs-restart-${suffix}`, idempotent: true, maxInFlightRequests: 1,
                                       retry: EOS_RETRY })
  const topic = `kjs-restart-${suffix}`
  const groupId = `kjs-restart-${suffix}`
  const result = { topic }
  const consumer = kafka.consumer({ groupId, ...FAST_GROUP })
  const received = []
  const distinct = new Set()
  const waiters = []
  // Distinct values: a record consumed again after the restart (at-least-once) does not count twice.
  const receivedAtLeast = n => distinct.size >= n ? Promise.resolve() : new Promise(r => waiters.push({ n, r }))
  await admin.connect()
  await producer.connect()
  await txnProducer.connect()
  try {
    await createTopic(admin, topic, 3)
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({ autoCommitInterval: 100, eachMessage: async ({ partition, message }) => {
      received.push({ partition, offset: Number(message.offset), value: message.value.toString() })
      distinct.add(message.value.toString())
      for (const w of waiters.filter(w => distinct.size >= w.n)) { waiters.splice(waiters.indexOf(w), 1); w.r() }
    } })
    await producer.send({ topic, acks: -1, messages: Array.from({ length: 12 }, (_, i) => ({ key: `k${i}`, value: `before-${i}` })) })
    let txn = await txnProducer.transaction()
    await txn.send({ topic, acks: -1, messages: Array.from({ length: 3 }, (_, i) => ({ key: `k${i}`, value: `txn-before-${i}` })) })
    await txn.commit()
    await withDeadline(receivedAtLeast(15), 'the records sent before the restart')
    await checkpoint('restart-now')
    await producer.send({ topic, acks: -1, messages: Array.from({ length: 12 }, (_, i) => ({ key: `k${i}`, value: `after-${i}` })) })
    txn = await txnProducer.transaction()
    await txn.send({ topic, acks: -1, messages: Array.from({ length: 3 }, (_, i) => ({ key: `k${i}`, value: `txn-after-${i}` })) })
    await txn.commit()
    await withDeadline(receivedAtLeast(30), `the records sent after the restart (${distinct.size} so far)`)
    result.received = received
    result.endOffsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
  } finally {
    await consumer.disconnect()
    await txnProducer.disconnect()
    await producer.disconnect()
    await admin.disconnect()
  }
  return result
}

// ---------------------------------------------------------------------------------------------- main
async function main() {
  if (!bootstrap || !scenarios[scenario]) {
    throw new Error(`usage: node scenarios.js <bootstrap> <${Object.keys(scenarios).join('|')}> [suffix]`)
  }
  const started = Date.now()
  const result = await withDeadline(scenarios[scenario](), `scenario ${scenario}`, DEADLINE_MS + 5000)
  result.elapsedMs = Date.now() - started
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().then(
  () => process.exit(0),
  error => {
    process.stdout.write(JSON.stringify({ error: String(error && error.stack || error), type: error && error.type,
                                          name: error && error.name }) + '\n')
    process.exit(1)
  },
)
