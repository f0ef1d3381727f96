/*
 * The raw end-to-end client of benchmarks/latency.py in C (``--c-e2e``): what ``raw_e2e_main`` in
 * benchmarks/rawclients.py does, with a few microseconds of its own code a record instead of tens
 * (the kernel's work for its socket calls, which both pay, is most of what it costs).
 *
 *     cc -O2 -o rawe2e benchmarks/rawe2e.c
 *     ./rawe2e --bootstrap 127.0.0.1:9092 --topic lat --rate 10000 --acks all --seconds 5
 *
 * A producer on one socket sends Produce v9 requests at the rate without waiting for their answers
 * (at most --max-in-flight unanswered); whenever a place in the window is free, every record due by
 * then and not sent yet goes in one record batch (magic 2, uncompressed) of at most
 * --max-batch-records (by default as many as fit in 16 KiB, a Kafka producer's batch.size). Each
 * record's value is 100 bytes whose first 16 are the request's send time and the record's due time
 * (CLOCK_MONOTONIC in ns, big endian). A consumer on a second socket long-polls with Fetch v12 (no
 * fetch session, max_wait_ms 500, min_bytes 1) from the offset after the last whole batch it read,
 * the moment the previous answer is in, and reads each record's two times back. One select() waits
 * for either socket and the next send time; the first second is warm-up, not counted. At the end one
 * line of JSON on stdout, the same fields as raw_e2e_main prints; on a protocol error or a closed
 * connection one line on stderr and exit status 1. POSIX and libc only.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_NS 1000000000LL
#define VALUE_SIZE 100
#define BATCH_SIZE 16384          /* bytes: a Kafka producer's default batch.size */
#define BATCH_OVERHEAD 61         /* a magic-2 batch's header */
#define CLIENT_ID "latency-raw"
#define PRODUCE_RECEIVE (1 << 16) /* bytes a recv on each socket asks for, as rawclients.py */
#define FETCH_RECEIVE (1 << 20)
#define CONTROL_BATCH 0x20
#define COMPRESSION_MASK 0x07

static void fail(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fputs("rawe2e: ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
    exit(1);
}

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static int64_t wall_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000LL + now.tv_nsec / 1000000;
}

static double own_cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

/* --- CRC-32C (Castagnoli), one table ------------------------------------------------------------------- */

static uint32_t crc_table[256];

static void crc32c_init(void) {
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
        crc_table[byte] = crc;
    }
}

static uint32_t crc32c(const unsigned char *data, size_t size) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t index = 0; index < size; index++)
        crc = crc_table[(crc ^ data[index]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

/* --- writing requests --------------------------------------------------------------------------------- */

typedef struct {
    unsigned char *data;
    size_t size, capacity;
} Writer;

static void reserve(Writer *writer, size_t more) {
    if (writer->size + more <= writer->capacity)
        return;
    size_t capacity = writer->capacity ? writer->capacity : 256;
    while (capacity < writer->size + more)
        capacity *= 2;
    writer->data = realloc(writer->data, capacity);
    if (!writer->data)
        fail("out of memory");
    writer->capacity = capacity;
}

static void put_bytes(Writer *writer, const void *bytes, size_t size) {
    reserve(writer, size);
    memcpy(writer->data + writer->size, bytes, size);
    writer->size += size;
}

static void store_big_endian(unsigned char *at, uint64_t value, int width) {
    for (int index = width - 1; index >= 0; index--, value >>= 8)
        at[index] = (unsigned char)value;
}

static void put_int(Writer *writer, int64_t value, int width) {
    reserve(writer, (size_t)width);
    store_big_endian(writer->data + writer->size, (uint64_t)value, width);
    writer->size += (size_t)width;
}

static void put_uvarint(Writer *writer, uint64_t value) {
    reserve(writer, 10);
    while (value >= 0x80) {
        writer->data[writer->size++] = (unsigned char)(value | 0x80);
        value >>= 7;
    }
    writer->data[writer->size++] = (unsigned char)value;
}

static void put_varint(Writer *writer, int32_t value) { /* zigzag */
    put_uvarint(writer, ((uint32_t)value << 1) ^ (uint32_t)(value >> 31));
}

static size_t uvarint_size(uint64_t value) {
    size_t size = 1;
    for (; value >= 0x80; value >>= 7)
        size++;
    return size;
}

static void put_compact_string(Writer *writer, const char *text) {
    size_t size = strlen(text);
    put_uvarint(writer, size + 1);
    put_bytes(writer, text, size);
}

/* A request header v2 (flexible versions) after a size to be filled in by finish_request. */
static void start_request(Writer *writer, int api_key, int version, int32_t correlation_id) {
    writer->size = 0;
    put_int(writer, 0, 4);
    put_int(writer, api_key, 2);
    put_int(writer, version, 2);
    put_int(writer, correlation_id, 4);
    put_int(writer, (int64_t)strlen(CLIENT_ID), 2);
    put_bytes(writer, CLIENT_ID, strlen(CLIENT_ID));
    put_uvarint(writer, 0); /* no tagged fields */
}

static void finish_request(Writer *writer) {
    store_big_endian(writer->data, writer->size - 4, 4);
}

/* The body of one record (after its length): no key, no headers, a value of VALUE_SIZE bytes. */
static size_t record_body_size(int32_t offset_delta) {
    return 1 + 1 + uvarint_size(((uint32_t)offset_delta << 1) ^ (uint32_t)(offset_delta >> 31)) + 1 +
           uvarint_size(VALUE_SIZE << 1) + VALUE_SIZE + 1;
}

/* How many of this client's records fit in one uncompressed batch of BATCH_SIZE bytes (one at least). */
static int records_per_batch(void) {
    size_t size = BATCH_OVERHEAD;
    int count = 0;
    for (;;) {
        size_t body = record_body_size(count);
        size += uvarint_size(body << 1) + body;
        if (size > BATCH_SIZE)
            return count > 0 ? count : 1;
        count++;
    }
}

static void put_produce(Writer *writer, int32_t correlation_id, int acks, const char *topic, int count,
                        int64_t sent_ns, const int64_t *due_ns, int64_t timestamp_ms) {
    start_request(writer, 0, 9, correlation_id);
    put_uvarint(writer, 0); /* transactional id: null */
    put_int(writer, acks, 2);
    put_int(writer, 30000, 4); /* timeout_ms */
    put_uvarint(writer, 2);    /* one topic */
    put_compact_string(writer, topic);
    put_uvarint(writer, 2); /* one partition */
    put_int(writer, 0, 4);
    size_t batch_size = BATCH_OVERHEAD;
    for (int index = 0; index < count; index++) {
        size_t body = record_body_size(index);
        batch_size += uvarint_size(body << 1) + body;
    }
    put_uvarint(writer, batch_size + 1);
    size_t batch_at = writer->size;
    put_int(writer, 0, 8);                                   /* base offset */
    put_int(writer, (int64_t)batch_size - 12, 4);            /* batch length */
    put_int(writer, -1, 4);                                  /* partition leader epoch */
    put_int(writer, 2, 1);                                   /* magic */
    put_int(writer, 0, 4);                                   /* CRC, below */
    put_int(writer, 0, 2);                                   /* attributes */
    put_int(writer, count - 1, 4);                           /* last offset delta */
    put_int(writer, timestamp_ms, 8);                        /* base timestamp */
    put_int(writer, timestamp_ms, 8);                        /* max timestamp */
    put_int(writer, -1, 8);                                  /* producer id */
    put_int(writer, -1, 2);                                  /* producer epoch */
    put_int(writer, -1, 4);                                  /* base sequence */
    put_int(writer, count, 4);                               /* records count */
    static char padding[VALUE_SIZE - 16];
    if (padding[0] != 'x')
        memset(padding, 'x', sizeof padding);
    for (int index = 0; index < count; index++) {
        put_varint(writer, (int32_t)record_body_size(index));
        put_int(writer, 0, 1);  /* attributes */
        put_varint(writer, 0);  /* timestamp delta */
        put_varint(writer, index);
        put_varint(writer, -1); /* no key */
        put_varint(writer, VALUE_SIZE);
        put_int(writer, sent_ns, 8);
        put_int(writer, due_ns[index], 8);
        put_bytes(writer, padding, sizeof padding);
        put_uvarint(writer, 0); /* no headers */
    }
    if (writer->size - batch_at != batch_size)
        fail("a batch of %d records took %zu bytes, not %zu", count, writer->size - batch_at, batch_size);
    unsigned char *batch = writer->data + batch_at;
    store_big_endian(batch + 17, crc32c(batch + 21, batch_size - 21), 4);
    put_uvarint(writer, 0); /* partition tagged fields */
    put_uvarint(writer, 0); /* topic tagged fields */
    put_uvarint(writer, 0); /* request tagged fields */
    finish_request(writer);
}

static void put_fetch(Writer *writer, int32_t correlation_id, const char *topic, int64_t fetch_offset) {
    start_request(writer, 1, 12, correlation_id);
    put_int(writer, -1, 4);       /* replica id */
    put_int(writer, 500, 4);      /* max_wait_ms */
    put_int(writer, 1, 4);        /* min_bytes */
    put_int(writer, 52428800, 4); /* max_bytes */
    put_int(writer, 0, 1);        /* isolation level: read uncommitted */
    put_int(writer, 0, 4);        /* session id: none */
    put_int(writer, -1, 4);       /* session epoch: no session */
    put_uvarint(writer, 2);       /* one topic */
    put_compact_string(writer, topic);
    put_uvarint(writer, 2); /* one partition */
    put_int(writer, 0, 4);
    put_int(writer, -1, 4); /* current leader epoch */
    put_int(writer, fetch_offset, 8);
    put_int(writer, -1, 4);      /* last fetched epoch */
    put_int(writer, -1, 8);      /* log start offset */
    put_int(writer, 1048576, 4); /* partition max bytes */
    put_uvarint(writer, 0);      /* partition tagged fields */
    put_uvarint(writer, 0);      /* topic tagged fields */
    put_uvarint(writer, 1);      /* no forgotten topics */
    put_uvarint(writer, 1);      /* rack id: "" */
    put_uvarint(writer, 0);      /* request tagged fields */
    finish_request(writer);
}

static void put_metadata(Writer *writer, int32_t correlation_id, const char *topic) {
    start_request(writer, 3, 9, correlation_id);
    put_uvarint(writer, 2); /* one topic */
    put_compact_string(writer, topic);
    put_uvarint(writer, 0); /* topic tagged fields */
    put_int(writer, 1, 1);  /* allow auto topic creation */
    put_int(writer, 0, 1);  /* include cluster authorized operations */
    put_int(writer, 0, 1);  /* include topic authorized operations */
    put_uvarint(writer, 0);
    finish_request(writer);
}

/* --- reading answers ---------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *data;
    size_t size, position;
    const char *what; /* for the error message */
} Reader;

static void need(Reader *reader, size_t size) {
    if (reader->size - reader->position < size)
        fail("a malformed %s: it ends before its fields do", reader->what);
}

static int64_t get_int(Reader *reader, int width) {
    need(reader, (size_t)width);
    uint64_t value = 0;
    for (int index = 0; index < width; index++)
        value = value << 8 | reader->data[reader->position++];
    if (width < 8 && (value >> (8 * width - 1)) & 1)
        value |= ~(uint64_t)0 << (8 * width); /* sign */
    return (int64_t)value;
}

static uint64_t get_uvarint(Reader *reader) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        need(reader, 1);
        unsigned char byte = reader->data[reader->position++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80))
            return value;
    }
    fail("a malformed %s: a varint of more than 10 bytes", reader->what);
    return 0;
}

static int64_t get_varint(Reader *reader) { /* zigzag, int32 or int64 */
    uint64_t value = get_uvarint(reader);
    return (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
}

static void skip(Reader *reader, size_t size) {
    need(reader, size);
    reader->position += size;
}

static void skip_tagged_fields(Reader *reader) {
    for (uint64_t count = get_uvarint(reader); count > 0; count--) {
        get_uvarint(reader); /* tag */
        skip(reader, get_uvarint(reader));
    }
}

static void skip_compact_string(Reader *reader) {
    uint64_t size = get_uvarint(reader);
    if (size > 0)
        skip(reader, size - 1);
}

/* A response header v1 (flexible versions): the correlation id checked, the tagged fields skipped. */
static void read_response_header(Reader *reader, int32_t correlation_id) {
    int32_t answered = (int32_t)get_int(reader, 4);
    if (answered != correlation_id)
        fail("a %s answers correlation id %d, not %d", reader->what, answered, correlation_id);
    skip_tagged_fields(reader);
}

/* A Produce v9 answer's error code and base offset for its first partition. */
static void read_produce_answer(Reader *reader, int32_t correlation_id, int *error_code, int64_t *base_offset) {
    read_response_header(reader, correlation_id);
    if (get_uvarint(reader) < 2)
        fail("a Produce answer without a topic");
    skip_compact_string(reader);
    if (get_uvarint(reader) < 2)
        fail("a Produce answer without a partition");
    get_int(reader, 4); /* partition index */
    *error_code = (int)get_int(reader, 2);
    *base_offset = get_int(reader, 8);
}

/* A Fetch v12 answer's error code (the response's if it has one, else its first partition's) and
   that partition's records (size 0 when there are none). */
static void read_fetch_answer(Reader *reader, int32_t correlation_id, int *error_code, const unsigned char **records,
                              size_t *records_size) {
    read_response_header(reader, correlation_id);
    get_int(reader, 4); /* throttle time */
    *error_code = (int)get_int(reader, 2);
    get_int(reader, 4); /* session id */
    *records = NULL;
    *records_size = 0;
    if (*error_code)
        return;
    if (get_uvarint(reader) < 2)
        fail("a Fetch answer without a topic");
    skip_compact_string(reader);
    if (get_uvarint(reader) < 2)
        fail("a Fetch answer without a partition");
    get_int(reader, 4); /* partition index */
    *error_code = (int)get_int(reader, 2);
    skip(reader, 8 + 8 + 8); /* high watermark, last stable offset, log start offset */
    uint64_t aborted = get_uvarint(reader);
    for (; aborted > 1; aborted--) { /* producer id, first offset, tagged fields */
        skip(reader, 16);
        skip_tagged_fields(reader);
    }
    get_int(reader, 4); /* preferred read replica */
    uint64_t size = get_uvarint(reader);
    if (size > 1) {
        need(reader, size - 1);
        *records = reader->data + reader->position;
        *records_size = size - 1;
    }
}

static int64_t load_int64(const unsigned char *at) {
    uint64_t value = 0;
    for (int index = 0; index < 8; index++)
        value = value << 8 | at[index];
    return (int64_t)value;
}

static int32_t load_int32(const unsigned char *at) {
    return (int32_t)((uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | at[3]);
}

/* --- figures ------------------------------------------------------------------------------------------ */

typedef struct {
    double *values;
    size_t count, capacity;
} Series;

static void add(Series *series, double value) {
    if (series->count == series->capacity) {
        series->capacity = series->capacity ? series->capacity * 2 : 4096;
        series->values = realloc(series->values, series->capacity * sizeof *series->values);
        if (!series->values)
            fail("out of memory");
    }
    series->values[series->count++] = value;
}

static void print_series(const char *name, const Series *series) {
    printf("\"%s\": [", name);
    for (size_t index = 0; index < series->count; index++)
        printf(index ? ", %.6f" : "%.6f", series->values[index]);
    printf("]");
}

typedef struct {
    int64_t measuring_from;
    Series ends, ends_from_due;
} Consumed;

/* Each record's two times out of a Fetch answer's records, and the offset after its last whole batch
   (-1 if it holds none). A partial batch at the end (Kafka cuts an answer at a size) is left for the
   next Fetch; control batches are skipped. */
static int64_t read_records(const unsigned char *records, size_t size, int64_t received, Consumed *consumed) {
    int64_t next_offset = -1;
    size_t position = 0;
    while (size - position >= BATCH_OVERHEAD) {
        const unsigned char *batch = records + position;
        int64_t base_offset = load_int64(batch);
        int32_t length = load_int32(batch + 8);
        if (length < BATCH_OVERHEAD - 12)
            fail("a record batch of %d bytes", length);
        if ((size_t)length > size - position - 12)
            break; /* a partial batch ends an answer */
        if (batch[16] != 2)
            fail("a record batch of magic %d", batch[16]);
        int attributes = batch[21] << 8 | batch[22];
        if (!(attributes & CONTROL_BATCH)) {
            if (attributes & COMPRESSION_MASK)
                fail("a compressed record batch (this client sends none)");
            Reader reader = {batch, (size_t)length + 12, BATCH_OVERHEAD, "record batch"};
            for (int32_t count = load_int32(batch + 57); count > 0; count--) {
                int64_t record_size = get_varint(&reader);
                if (record_size < 0)
                    fail("a record of %lld bytes", (long long)record_size);
                need(&reader, (size_t)record_size);
                size_t record_end = reader.position + (size_t)record_size;
                Reader record = {batch, record_end, reader.position, "record"};
                skip(&record, 1);     /* attributes */
                get_varint(&record);  /* timestamp delta */
                get_varint(&record);  /* offset delta */
                int64_t key_size = get_varint(&record);
                if (key_size > 0)
                    skip(&record, (size_t)key_size);
                int64_t value_size = get_varint(&record);
                if (value_size >= 16) {
                    need(&record, 16);
                    int64_t sent_at = load_int64(batch + record.position);
                    int64_t due_at = load_int64(batch + record.position + 8);
                    if (sent_at >= consumed->measuring_from) {
                        add(&consumed->ends, (received - sent_at) / 1e6);
                        add(&consumed->ends_from_due, (received - due_at) / 1e6);
                    }
                }
                reader.position = record_end;
            }
        }
        next_offset = base_offset + load_int32(batch + 23) + 1;
        position += (size_t)length + 12;
    }
    return next_offset;
}

/* --- sockets ------------------------------------------------------------------------------------------ */

static int connect_to(const char *bootstrap) {
    char host[256];
    const char *first_end = strchr(bootstrap, ',');
    size_t first_size = first_end ? (size_t)(first_end - bootstrap) : strlen(bootstrap);
    const char *colon = NULL;
    for (const char *at = bootstrap; at < bootstrap + first_size; at++)
        if (*at == ':')
            colon = at;
    if (!colon || (size_t)(colon - bootstrap) >= sizeof host)
        fail("no host:port in --bootstrap %s", bootstrap);
    const char *host_start = bootstrap, *host_end = colon;
    if (*host_start == '[' && host_end[-1] == ']')
        host_start++, host_end--;
    memcpy(host, host_start, (size_t)(host_end - host_start));
    host[host_end - host_start] = '\0';
    char port[16];
    snprintf(port, sizeof port, "%.*s", (int)(bootstrap + first_size - colon - 1), colon + 1);
    struct addrinfo hints = {0}, *addresses;
    hints.ai_socktype = SOCK_STREAM;
    int status = getaddrinfo(host, port, &hints, &addresses);
    if (status)
        fail("cannot resolve %s: %s", host, gai_strerror(status));
    int connection = socket(addresses->ai_family, SOCK_STREAM, 0);
    if (connection < 0)
        fail("socket: %s", strerror(errno));
    int flags = fcntl(connection, F_GETFL);
    fcntl(connection, F_SETFL, flags | O_NONBLOCK);
    if (connect(connection, addresses->ai_addr, addresses->ai_addrlen) && errno != EINPROGRESS)
        fail("cannot connect to %s:%s: %s", host, port, strerror(errno));
    struct pollfd writable = {connection, POLLOUT, 0};
    int error = 0;
    socklen_t error_size = sizeof error;
    if (poll(&writable, 1, 30000) != 1 || getsockopt(connection, SOL_SOCKET, SO_ERROR, &error, &error_size) || error)
        fail("cannot connect to %s:%s: %s", host, port, error ? strerror(error) : "timed out");
    fcntl(connection, F_SETFL, flags);
    freeaddrinfo(addresses);
    int on = 1;
    setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    struct timeval limit = {30, 0}; /* a send the server does not take in 30 s fails */
    setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    return connection;
}

static void send_all(int connection, const Writer *frame, const char *whose) {
    for (size_t sent = 0; sent < frame->size;) {
        ssize_t done = send(connection, frame->data + sent, frame->size - sent, MSG_NOSIGNAL);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            fail("cannot send on the %s connection: %s", whose, done < 0 ? strerror(errno) : "closed");
        sent += (size_t)done;
    }
}

/* The bytes read from one socket and not handed out as frames yet. */
typedef struct {
    unsigned char *data;
    size_t start, size, capacity;
} Inbox;

/* One recv of up to `most` bytes into the inbox; fails on a closed connection. */
static void receive(int connection, Inbox *inbox, size_t most, const char *whose) {
    if (inbox->start) {
        memmove(inbox->data, inbox->data + inbox->start, inbox->size - inbox->start);
        inbox->size -= inbox->start;
        inbox->start = 0;
    }
    if (inbox->capacity - inbox->size < most) {
        inbox->capacity = inbox->size + most;
        inbox->data = realloc(inbox->data, inbox->capacity);
        if (!inbox->data)
            fail("out of memory");
    }
    ssize_t done;
    do
        done = recv(connection, inbox->data + inbox->size, most, 0);
    while (done < 0 && errno == EINTR);
    if (done < 0)
        fail("cannot read the %s connection: %s", whose, strerror(errno));
    if (done == 0)
        fail("the server closed the %s connection", whose);
    inbox->size += (size_t)done;
}

/* The next complete frame in the inbox (without its size), or 0 if there is none yet. */
static int next_frame(Inbox *inbox, const unsigned char **frame, size_t *size) {
    if (inbox->size - inbox->start < 4)
        return 0;
    int32_t length = load_int32(inbox->data + inbox->start);
    if (length < 0)
        fail("a frame of %d bytes", length);
    if (inbox->size - inbox->start - 4 < (size_t)length)
        return 0;
    *frame = inbox->data + inbox->start + 4;
    *size = (size_t)length;
    inbox->start += 4 + (size_t)length;
    return 1;
}

/* Until the topic has a leader (a Metadata request creates it where the server does that): 20 s. */
static void await_topic(int connection, const char *topic) {
    Writer request = {0};
    Inbox inbox = {0};
    int64_t deadline = monotonic_ns() + 20000000000LL;
    for (int32_t correlation_id = 1;; correlation_id++) {
        put_metadata(&request, correlation_id, topic);
        send_all(connection, &request, "producer's");
        const unsigned char *frame;
        size_t size;
        while (!next_frame(&inbox, &frame, &size)) {
            struct pollfd readable = {connection, POLLIN, 0};
            int wait_ms = (int)((deadline - monotonic_ns()) / 1000000);
            if (wait_ms <= 0 || poll(&readable, 1, wait_ms) != 1)
                fail("no Metadata answer for topic %s", topic);
            receive(connection, &inbox, 1 << 16, "producer's");
        }
        Reader reader = {frame, size, 0, "Metadata answer"};
        read_response_header(&reader, correlation_id);
        get_int(&reader, 4); /* throttle time */
        for (uint64_t brokers = get_uvarint(&reader); brokers > 1; brokers--) {
            get_int(&reader, 4); /* node id */
            skip_compact_string(&reader); /* host */
            get_int(&reader, 4); /* port */
            skip_compact_string(&reader); /* rack */
            skip_tagged_fields(&reader);
        }
        skip_compact_string(&reader); /* cluster id */
        get_int(&reader, 4);          /* controller id */
        if (get_uvarint(&reader) > 1) {
            int error_code = (int)get_int(&reader, 2);
            skip_compact_string(&reader); /* name */
            skip(&reader, 1);             /* is internal */
            if (error_code == 0 && get_uvarint(&reader) > 1)
                break;
        }
        if (monotonic_ns() > deadline)
            fail("topic %s has no leader", topic);
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
    }
    free(request.data);
    free(inbox.data);
}

/* --- the run ------------------------------------------------------------------------------------------- */

typedef struct {
    const char *bootstrap, *topic;
    int64_t rate;
    int acks, max_in_flight, max_batch_records, one_record_per_request;
    double seconds;
} Options;

static Options parse_options(int count, char **arguments) {
    Options options = {NULL, NULL, 0, 1, 5, 0, 0, 5.0};
    for (int index = 1; index < count; index++) {
        const char *name = arguments[index];
        if (!strcmp(name, "--one-record-per-request")) {
            options.one_record_per_request = 1;
            continue;
        }
        if (index + 1 >= count)
            fail("usage: rawe2e --bootstrap HOST:PORT --topic TOPIC --rate N [--acks 1|all] [--seconds S]"
                 " [--max-in-flight N] [--max-batch-records N] [--one-record-per-request]");
        const char *value = arguments[++index];
        if (!strcmp(name, "--bootstrap"))
            options.bootstrap = value;
        else if (!strcmp(name, "--topic"))
            options.topic = value;
        else if (!strcmp(name, "--rate"))
            options.rate = atoll(value);
        else if (!strcmp(name, "--acks"))
            options.acks = strcmp(value, "all") ? atoi(value) : -1;
        else if (!strcmp(name, "--seconds"))
            options.seconds = atof(value);
        else if (!strcmp(name, "--max-in-flight"))
            options.max_in_flight = atoi(value);
        else if (!strcmp(name, "--max-batch-records"))
            options.max_batch_records = atoi(value);
        else
            fail("unknown option %s", name);
    }
    if (!options.bootstrap || !options.topic || options.rate <= 0 || options.max_in_flight <= 0 || options.seconds < 0)
        fail("--bootstrap, --topic and a positive --rate are needed (and a positive --max-in-flight)");
    return options;
}

/* A Produce request not answered yet: its send time and its records, by index from the first. */
typedef struct {
    int64_t sent_at;
    int64_t first, count;
    int32_t correlation_id;
} InFlight;

/* What a run knows: raw_e2e_main's variables, by the same names. */
typedef struct {
    Options options;
    int producer, consumer, max_records, window, oldest, unanswered;
    int64_t rate, total, start, wall_ms_at_start, sent, held_until;
    int64_t last_offset;  /* of the last record acknowledged */
    int64_t fetch_offset; /* a fresh topic: from its start (the first second is not counted anyway) */
    int32_t correlation_id, fetch_correlation_id;
    long long failures, fetch_errors, late, held, fetches, requests;
    InFlight *in_flight;
    int64_t *due_times;
    Series acked, acked_from_due;
    Consumed consumed;
    Writer produce_request, fetch_request;
    Inbox producer_inbox, consumer_inbox;
} Run;

static int64_t due_time(const Run *run, int64_t index) {
    return run->start + index * 1000000000 / run->rate;
}

/* While a place in the window is free, every record due and not sent yet in one request (at most
   max_records); returns how long select may wait. */
static int64_t send_due_records(Run *run, int64_t now) {
    int64_t timeout_ns = 500000000; /* also the most a full window waits before looking again */
    int64_t due = (now - run->start) * run->rate / 1000000000 + 1;
    if (due > run->total)
        due = run->total;
    while (run->sent < due && run->unanswered < run->window) {
        int64_t up_to = due < run->sent + run->max_records ? due : run->sent + run->max_records;
        int records = (int)(up_to - run->sent);
        for (int index = 0; index < records; index++) {
            run->due_times[index] = due_time(run, run->sent + index);
            if (run->due_times[index] < now - 1000000)
                run->late++; /* sent more than a millisecond after its time */
        }
        if (run->sent < run->held_until)
            run->held += (run->held_until < up_to ? run->held_until : up_to) - run->sent;
        put_produce(&run->produce_request, run->correlation_id, run->options.acks, run->options.topic, records, now,
                    run->due_times, run->wall_ms_at_start + (now - run->start) / 1000000);
        send_all(run->producer, &run->produce_request, "producer's");
        run->in_flight[(run->oldest + run->unanswered) % run->window] =
            (InFlight){now, run->sent, records, run->correlation_id};
        run->unanswered++;
        run->correlation_id++;
        run->requests++;
        run->sent = up_to;
        now = monotonic_ns();
    }
    if (run->sent < due)
        run->held_until = due; /* due while the window is full: sent when an answer frees a place */
    else if (run->sent < run->total)
        timeout_ns = due_time(run, run->sent) - now;
    return timeout_ns > 0 ? timeout_ns : 0;
}

static void take_produce_answers(Run *run) {
    receive(run->producer, &run->producer_inbox, PRODUCE_RECEIVE, "producer's");
    int64_t received = monotonic_ns();
    const unsigned char *frame;
    size_t size;
    while (next_frame(&run->producer_inbox, &frame, &size)) {
        if (!run->unanswered)
            fail("a Produce answer to no request");
        InFlight request = run->in_flight[run->oldest];
        run->oldest = (run->oldest + 1) % run->window;
        run->unanswered--;
        Reader reader = {frame, size, 0, "Produce answer"};
        int error_code;
        int64_t base_offset;
        read_produce_answer(&reader, request.correlation_id, &error_code, &base_offset);
        if (error_code) {
            run->failures += request.count;
            continue;
        }
        if (base_offset + request.count - 1 > run->last_offset)
            run->last_offset = base_offset + request.count - 1;
        if (request.sent_at >= run->consumed.measuring_from) {
            for (int64_t index = request.first; index < request.first + request.count; index++) {
                add(&run->acked, (received - request.sent_at) / 1e6);
                add(&run->acked_from_due, (received - due_time(run, index)) / 1e6);
            }
        }
    }
}

static void take_fetch_answers(Run *run) {
    receive(run->consumer, &run->consumer_inbox, FETCH_RECEIVE, "consumer's");
    int64_t received = monotonic_ns();
    const unsigned char *frame;
    size_t size;
    while (next_frame(&run->consumer_inbox, &frame, &size)) {
        Reader reader = {frame, size, 0, "Fetch answer"};
        int error_code;
        const unsigned char *records;
        size_t records_size;
        read_fetch_answer(&reader, run->fetch_correlation_id, &error_code, &records, &records_size);
        if (error_code) {
            if (++run->fetch_errors > 100)
                fail("Fetch answered error %d %lld times", error_code, run->fetch_errors);
            struct timespec pause = {0, 10000000};
            nanosleep(&pause, NULL);
        } else {
            int64_t next_offset = read_records(records, records_size, received, &run->consumed);
            if (next_offset > run->fetch_offset)
                run->fetch_offset = next_offset;
        }
        run->fetches++;
        run->fetch_correlation_id++;
        put_fetch(&run->fetch_request, run->fetch_correlation_id, run->options.topic, run->fetch_offset);
        send_all(run->consumer, &run->fetch_request, "consumer's");
    }
}

static void print_result(const Run *run, double cpu) {
    static char output[1 << 20];
    setvbuf(stdout, output, _IOFBF, sizeof output);
    printf("{");
    print_series("acked", &run->acked);
    printf(", ");
    print_series("ends", &run->consumed.ends);
    printf(", \"failures\": %lld, \"cpu\": %.6f, \"late\": %lld, \"held\": %lld, \"fetches\": %lld, ", run->failures,
           cpu, run->late + (long long)(run->total - run->sent), run->held, run->fetches);
    print_series("acked_from_due", &run->acked_from_due);
    printf(", ");
    print_series("ends_from_due", &run->consumed.ends_from_due);
    printf(", \"requests\": %lld, \"sent\": %lld, \"max_records\": %d}\n", run->requests, (long long)run->sent,
           run->max_records);
    if (fflush(stdout))
        fail("cannot write the result: %s", strerror(errno));
}

int main(int count, char **arguments) {
    static Run run; /* zeroed */
    run.options = parse_options(count, arguments);
    crc32c_init();
    run.producer = connect_to(run.options.bootstrap);
    await_topic(run.producer, run.options.topic);
    run.consumer = connect_to(run.options.bootstrap);
    run.max_records = run.options.one_record_per_request ? 1
                      : run.options.max_batch_records > 0 ? run.options.max_batch_records
                                                           : records_per_batch();
    run.rate = run.options.rate;
    run.total = (int64_t)(run.rate * (run.options.seconds + WARMUP_NS / 1e9));
    run.window = run.options.max_in_flight;
    run.in_flight = calloc((size_t)run.window, sizeof *run.in_flight);
    run.due_times = calloc((size_t)run.max_records, sizeof *run.due_times);
    if (!run.in_flight || !run.due_times)
        fail("out of memory");
    run.last_offset = -1;
    run.correlation_id = run.fetch_correlation_id = 2;
    put_fetch(&run.fetch_request, run.fetch_correlation_id, run.options.topic, run.fetch_offset);
    send_all(run.consumer, &run.fetch_request, "consumer's");
    double cpu_before = own_cpu_seconds();
    run.start = monotonic_ns();
    run.wall_ms_at_start = wall_ms();
    run.consumed.measuring_from = run.start + WARMUP_NS;
    int64_t give_up = run.start + (int64_t)((3 * (run.options.seconds + WARMUP_NS / 1e9) + 10) * 1e9);
    int highest = run.producer > run.consumer ? run.producer : run.consumer;
    for (;;) {
        int64_t now = monotonic_ns();
        int64_t timeout_ns = 500000000;
        if (run.sent < run.total)
            timeout_ns = send_due_records(&run, now);
        else if (!run.unanswered && run.fetch_offset > run.last_offset)
            break;
        if (monotonic_ns() > give_up)
            break;
        fd_set readable;
        FD_ZERO(&readable);
        FD_SET(run.producer, &readable);
        FD_SET(run.consumer, &readable);
        struct timeval timeout = {(time_t)(timeout_ns / 1000000000), (suseconds_t)(timeout_ns % 1000000000 / 1000)};
        if (select(highest + 1, &readable, NULL, NULL, &timeout) < 0) {
            if (errno == EINTR)
                continue;
            fail("select: %s", strerror(errno));
        }
        if (FD_ISSET(run.producer, &readable))
            take_produce_answers(&run);
        if (FD_ISSET(run.consumer, &readable))
            take_fetch_answers(&run);
    }
    double cpu = (own_cpu_seconds() - cpu_before) / (double)(run.sent > 1 ? run.sent : 1) * 1e6;
    close(run.producer);
    close(run.consumer);
    print_result(&run, cpu);
    return 0;
}
