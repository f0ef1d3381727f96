"""The code generator behind ``protocol.messages`` (run ``python -m kafkalite.protocol.codegen``)."""
