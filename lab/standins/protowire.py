"""The protobuf wire format, written out for the lab's stand-ins that speak gRPC with Debian's python3-grpcio (the
stand-in crictl, the stand-in device plugin): Debian ships no generated code for the CRI or the device plugin API,
so their messages are encoded and read by field number. Installed beside them in /usr/local/lib/kgn-lab.
https://protobuf.dev/programming-guides/encoding/
"""


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_bytes(number, data):
    return varint(number << 3 | 2) + varint(len(data)) + data


def _read_varint(buf, pos):
    """The varint that starts at ``pos``, and the position after it."""
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(buf):
    """Every field of a protobuf message as (number, value): bytes for length-delimited, int for varint."""
    pos, found = 0, []
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        found.append((number, value))
    return found


def field_varint(number, value):
    return varint(number << 3 | 0) + varint(value)


def field_string(number, text):
    return field_bytes(number, text.encode())


def field_map(number, mapping):
    """A map<string, string> field: one entry message (key = 1, value = 2) per key."""
    return b"".join(field_bytes(number, field_string(1, k) + field_string(2, v)) for k, v in sorted(mapping.items()))


def repeated(buf, number):
    """Every value of field ``number`` in a message, in order."""
    return [value for found, value in fields(buf) if found == number]
