use super::*;

fn key() -> ReceiptKey {
    ReceiptKey::from_bytes([7u8; 32])
}

fn fields() -> Receipt {
    Receipt {
        run_id: "20250101-abc".into(),
        repo: "/src/repo".into(),
        baseline_commit: "3f786850e387550fdab836ed7e6dc881de23001b".into(),
        baseline_fingerprint: "aa".repeat(32),
        patch_sha256: sha256_hex(b"patch"),
        final_fingerprint: "bb".repeat(32),
        verification: ReceiptVerification {
            passed: true,
            fingerprint: "bb".repeat(32),
            checks: vec![ReceiptCheck {
                name: "test".into(),
                command: "pytest -q".into(),
                exit_code: Some(0),
                passed: true,
            }],
        },
        events_sha256: "cc".repeat(32),
        ..Receipt::default()
    }
}

#[test]
fn a_signed_receipt_verifies_and_round_trips() {
    let receipt = Receipt::sign(&key(), fields()).expect("sign");
    assert_eq!(receipt.version, RECEIPT_VERSION);
    assert_eq!(receipt.hmac.len(), 64);
    receipt.verify(&key()).expect("verify");
    let text = serde_json::to_string_pretty(&receipt).expect("json");
    let back: Receipt = serde_json::from_str(&text).expect("parse");
    back.verify(&key()).expect("verify after round trip");
}

#[test]
fn another_key_fails() {
    let receipt = Receipt::sign(&key(), fields()).expect("sign");
    let err = receipt
        .verify(&ReceiptKey::from_bytes([8u8; 32]))
        .expect_err("other key");
    assert!(matches!(err, TraceError::ReceiptTampered), "{err}");
}

#[test]
fn tampering_with_any_field_fails() {
    let signed = Receipt::sign(&key(), fields()).expect("sign");
    type Tamper = (&'static str, fn(&mut Receipt));
    let tampers: Vec<Tamper> = vec![
        ("run_id", |r| r.run_id.push('x')),
        ("repo", |r| r.repo = "/other".into()),
        ("baseline_commit", |r| {
            r.baseline_commit.replace_range(0..1, "4")
        }),
        ("baseline_fingerprint", |r| {
            r.baseline_fingerprint = "ab".repeat(32)
        }),
        ("patch_sha256", |r| r.patch_sha256 = sha256_hex(b"other")),
        ("final_fingerprint", |r| {
            r.final_fingerprint = "ba".repeat(32)
        }),
        ("verification.passed", |r| r.verification.passed = false),
        ("verification.fingerprint", |r| {
            r.verification.fingerprint = "ab".repeat(32)
        }),
        ("check exit_code", |r| {
            r.verification.checks[0].exit_code = Some(1)
        }),
        ("check command", |r| {
            r.verification.checks[0].command = "true".into()
        }),
        ("check removed", |r| {
            r.verification.checks.clear();
        }),
        ("events_sha256", |r| r.events_sha256 = "dd".repeat(32)),
        ("created", |r| r.created = "2000-01-01T00:00:00.000Z".into()),
        ("version", |r| r.version = 2),
        ("hmac", |r| {
            // (A signature may start with "00" itself: one in 256.)
            let other = if r.hmac.starts_with("00") { "11" } else { "00" };
            r.hmac.replace_range(0..2, other)
        }),
        ("hmac not hex", |r| r.hmac = "zz".into()),
    ];
    for (what, tamper) in tampers {
        let mut receipt = signed.clone();
        tamper(&mut receipt);
        assert_ne!(receipt, signed, "{what} did not change the receipt");
        let err = receipt.verify(&key()).expect_err(what);
        assert!(matches!(err, TraceError::ReceiptTampered), "{what}: {err}");
    }
}

#[test]
fn canonical_text_sorts_keys_and_leaves_out_the_hmac() {
    let receipt = Receipt::sign(&key(), fields()).expect("sign");
    let text = receipt.signed_text().expect("canonical");
    assert!(!text.contains("hmac"));
    assert!(!text.contains(' ') || text.contains("pytest -q"));
    assert!(text.starts_with("{\"baseline_commit\":"), "{text}");
    let b = text.find("\"events_sha256\"").expect("events");
    let a = text.find("\"created\"").expect("created");
    assert!(a < b);
}

#[test]
fn unknown_fields_are_refused_when_loading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receipt = Receipt::sign(&key(), fields()).expect("sign");
    let mut value = serde_json::to_value(&receipt).expect("json");
    value["approved_by"] = "someone".into();
    let path = dir.path().join("receipt.json");
    std::fs::write(&path, value.to_string()).expect("write");
    let err = Receipt::load(&path).expect_err("unknown field");
    assert!(matches!(err, TraceError::Parse { .. }), "{err}");
}

#[test]
fn verify_against_checks_the_patch_and_the_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events.jsonl");
    std::fs::write(&events, "{\"seq\":1}\n").expect("write");
    let mut f = fields();
    f.patch_sha256 = sha256_hex(b"the patch");
    f.events_sha256 = digest(&events).expect("digest");
    let receipt = Receipt::sign(&key(), f).expect("sign");
    receipt
        .verify_against(&key(), b"the patch", &events)
        .expect("verifies");

    let err = receipt
        .verify_against(&key(), b"the patch!", &events)
        .expect_err("patch changed");
    assert!(matches!(err, TraceError::PatchMismatch { .. }), "{err}");

    std::fs::write(&events, "{\"seq\":2}\n").expect("write");
    let err = receipt
        .verify_against(&key(), b"the patch", &events)
        .expect_err("events changed");
    assert!(matches!(err, TraceError::EventsMismatch { .. }), "{err}");
}

mod key_file {
    use super::super::super::receipt_key::*;
    use crate::state::StateDir;
    use crate::trace::TraceError;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_missing_key_is_created_private_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().join("state"));
        let first = ReceiptKey::load_or_create(&state).expect("create").0;
        let path = ReceiptKey::path_in(&state);
        let meta = std::fs::metadata(&path).expect("stat");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), RECEIPT_KEY_LEN as u64);
        let second = ReceiptKey::load_or_create(&state).expect("load").0;
        assert_eq!(first, second);
        let leftovers: Vec<_> = std::fs::read_dir(state.root())
            .expect("read_dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .filter(|n| n != RECEIPT_KEY_FILE)
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert!(!format!("{first:?}").contains('7'));
    }

    #[test]
    fn a_key_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(RECEIPT_KEY_FILE);
        ReceiptKey::load_or_create_at(&path).expect("create");
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = ReceiptKey::load_or_create_at(&path).expect_err("too open");
            assert!(
                matches!(err, TraceError::KeyTooOpen { .. }),
                "{mode:o}: {err}"
            );
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
        ReceiptKey::load(&path).expect("0400 is private enough");
    }

    #[test]
    fn a_symlinked_or_short_key_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real.key");
        ReceiptKey::load_or_create_at(&real).expect("create");
        let link = dir.path().join(RECEIPT_KEY_FILE);
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let err = ReceiptKey::load_or_create_at(&link).expect_err("symlink");
        assert!(matches!(err, TraceError::KeyInvalid { .. }), "{err}");

        let short = dir.path().join("short.key");
        std::fs::write(&short, [1u8; 16]).expect("write");
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let err = ReceiptKey::load(&short).expect_err("short");
        assert!(err.to_string().contains("16 bytes"), "{err}");
    }
}
