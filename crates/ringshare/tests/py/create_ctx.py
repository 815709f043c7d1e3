"""Create contexts for the smbprotocol test scripts in this directory (imported by them)."""

from smbprotocol.create_contexts import (
    CreateContextName,
    SMB2CreateContextRequest,
    SMB2CreateDurableHandleReconnectV2,
    SMB2CreateDurableHandleRequestV2,
    SMB2CreateRequestLeaseV2,
)


def ctx(name, data):
    c = SMB2CreateContextRequest()
    c["buffer_name"] = name
    c["buffer_data"] = data
    return c


def lease_ctx(key, state, parent=None):
    """RqLs version 2 with lease key `key` (16 bytes) and `state` (R=1, H=2, W=4); `parent`:
    the ParentLeaseKey (16 bytes), if any."""
    lease = SMB2CreateRequestLeaseV2()
    lease["lease_key"] = key
    lease["lease_state"] = state
    if parent is not None:
        lease["lease_flags"] = 4  # SMB2_LEASE_FLAG_PARENT_LEASE_KEY_SET
    lease["parent_lease_key"] = parent or b"\0" * 16
    lease["epoch"] = b"\0\0"
    return ctx(CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2, lease)


def dh2q_ctx(create_guid, timeout_ms):
    d = SMB2CreateDurableHandleRequestV2()
    d["timeout"] = timeout_ms
    d["create_guid"] = create_guid
    return ctx(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2, d)


def dh2c_ctx(file_id, create_guid):
    d = SMB2CreateDurableHandleReconnectV2()
    d["file_id"] = file_id
    d["create_guid"] = create_guid
    return ctx(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2, d)
