//! The request headers the engine reads are the ones it lists for the driver.

use super::*;

#[test]
fn every_request_header_the_engine_reads_is_in_its_list() {
    // The Worker reads only `request_headers()` from the runtime (one by one, cheaper than
    // copying every header). A header the engine reads but does not list would silently
    // never arrive: record every name asked for across each kind of request, and check.
    let mut p = seed_policy();
    p.origin.idempotency_key_header = Some("Idempotency-Key".into());
    p.params[2].source = crate::policy::ParamSource::Header;
    p.params[2].from = "X-Limit".into();
    p.admin = Some(crate::policy::Admin {
        path: "/__status".into(),
        secret: "ADMIN".into(),
    });
    p.events = Some(crate::events::testing::events_policy());
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    HEADERS_ASKED.with(|h| h.borrow_mut().clear());
    warm(&mut e);
    run(&mut e, 10, "/recommendations/alice", ok());
    run(&mut e, 20, "/recommendations/alice", status(503));
    for (method, path) in [
        ("GET", "/__status"),
        ("POST", "/v1/events"),
        ("DELETE", "/recommendations/alice"),
        ("GET", "/nowhere"),
    ] {
        let headers = vec![("Authorization".to_string(), "Bearer x.y.z".to_string())];
        let req = Incoming {
            method,
            path,
            query: "",
            headers: &headers,
        };
        let _ = e.start(at(30), &req, &env(), 7);
    }
    let asked = HEADERS_ASKED.with(|h| h.borrow().clone());
    let listed = e.request_headers();
    for name in &asked {
        assert!(
            listed.contains(name),
            "`{name}` is read but not in {listed:?}"
        );
    }
    for own in ["idempotency-key", "x-limit"] {
        assert!(listed.iter().any(|h| h == own), "{own} in {listed:?}");
    }
    // The recorder saw the requests: the correlation ID, the token, the events' body headers.
    for h in ["x-correlation-id", "authorization", "content-type"] {
        assert!(asked.contains(h), "{h} not asked for: {asked:?}");
    }
    let mut unique = listed.to_vec();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "each name once: {listed:?}");
}
