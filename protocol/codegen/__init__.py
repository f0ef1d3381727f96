"""The code generator behind ``protocol.messages`` (run ``python -m protocol.codegen``)."""
