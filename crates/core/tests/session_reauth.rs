//! Re-authentication: SESSION_SETUP on an existing session keeps its id and opens.

mod support;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::*;

#[test]
fn re_authentication_keeps_the_session_id_and_its_open_files() {
    let mut c = Client::new();
    let sid = c.session_id;
    c.put_file("kept", b"still here");
    let f = c.create("kept", GENERIC_READ, D::OPEN, 0).unwrap();
    c.session_setup();
    assert_eq!(c.session_id, sid, "same session");
    assert_eq!(read_data(&c.read(f, 0, 64)), b"still here");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}
