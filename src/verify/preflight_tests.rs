use super::*;
use crate::verify::shell_words::simple_commands;

fn words(command: &str) -> Vec<Vec<String>> {
    simple_commands(command)
}

#[test]
fn commands_split_into_simple_commands_of_words() {
    assert_eq!(
        words("cd web && NODE_ENV=test npm test -- --ci; echo 'a b' | tee \"x y\""),
        vec![
            vec!["cd", "web"],
            vec!["NODE_ENV=test", "npm", "test", "--", "--ci"],
            vec!["echo", "a b"],
            vec!["tee", "x y"],
        ]
    );
    assert_eq!(
        words("cargo test 2>&1 >/dev/null | tail -n 5"),
        vec![vec!["cargo", "test"], vec!["tail", "-n", "5"]]
    );
    assert_eq!(
        words("(cd a && make) # done"),
        vec![vec!["cd", "a"], vec!["make"]]
    );
}

#[test]
fn the_program_is_past_assignments_and_wrappers() {
    assert_eq!(
        first_program("FOO=1 env -i BAR=2 time cargo test"),
        Some("cargo".into())
    );
    assert_eq!(
        first_program("exec python3 -m pytest"),
        Some("python3".into())
    );
    assert_eq!(first_program("echo hi && true"), None);
    assert_eq!(first_program("$TOOL run"), None);
    assert_eq!(first_program("$(which x)"), None);
}

fn needs(files: &[(&str, &str)], command: &str) -> Vec<Need> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    needs_of(dir.path(), command)
}

fn program(p: &str) -> Need {
    Need::Program(p.into())
}

#[test]
fn package_scripts_bring_their_own_programs() {
    let package = r#"{"scripts": {"test": "node --test", "lint": "eslint . && tsc --noEmit"}}"#;
    assert_eq!(
        needs(&[("package.json", package)], "npm test"),
        vec![
            program("npm"),
            Need::ScriptProgram {
                program: "node".into(),
                dir: String::new()
            }
        ]
    );
    let found = needs(&[("web/package.json", package)], "cd web && yarn lint");
    assert_eq!(found[0], program("yarn"));
    assert_eq!(
        found[1],
        Need::ScriptProgram {
            program: "eslint".into(),
            dir: "web".into()
        }
    );
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn interpreters_and_modules_are_needs_too() {
    assert_eq!(
        needs(&[("run.sh", "#!/usr/bin/env bash\necho\n")], "./run.sh"),
        vec![program("bash")]
    );
    assert_eq!(
        needs(&[("t/run", "#!/bin/zsh\n")], "t/run -v"),
        vec![Need::Path("/bin/zsh".into())]
    );
    assert_eq!(needs(&[], "./made-by-bootstrap.sh"), vec![]);
    assert_eq!(
        needs(&[], "python3 -m pytest -q"),
        vec![
            program("python3"),
            Need::PythonModule {
                python: "python3".into(),
                module: "pytest".into()
            }
        ]
    );
    // The project's own module is not the image's business.
    assert_eq!(
        needs(&[("mypkg/__init__.py", "")], "python3 -m mypkg.cli"),
        vec![program("python3")]
    );
}

#[test]
fn requirements_name_their_command_once() {
    let checks = vec![
        CheckSpec::new("unit", "cargo test --locked"),
        CheckSpec::new("lint", "cargo clippy && jq . x.json"),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let reqs = requirements(dir.path(), &checks, &["cargo fetch".into()]);
    let needs: Vec<&Need> = reqs.iter().map(|r| &r.need).collect();
    assert_eq!(needs, vec![&program("cargo"), &program("jq")]);
    assert_eq!(reqs[0].by, "bootstrap command 1 (`cargo fetch`)");
    assert_eq!(
        reqs[1].by,
        "the check `lint` (`cargo clippy && jq . x.json`)"
    );
    let text = describe_missing(&[&reqs[1]], "minicoder-sandbox:v1");
    assert!(text.contains("needs `jq`"), "{text}");
    assert!(text.contains("minicoder-sandbox:v1"), "{text}");
    assert!(text.contains(r#""packages": ["jq"]"#), "{text}");
}

#[test]
fn only_safe_words_reach_the_shell_test() {
    assert_eq!(needs(&[], "'a;b' x"), vec![]);
    let test = program("cargo").test();
    assert_eq!(test, "command -v cargo >/dev/null 2>&1");
}

#[test]
fn only_needs_that_no_workspace_file_can_meet_are_looked_for_before_the_copy() {
    let program = |p: &str| Need::Program(p.to_string());
    let path = |p: &str| Need::Path(p.to_string());
    assert!(program("shellcheck").is_workspace_free());
    assert!(path("/usr/bin/python3").is_workspace_free());
    for need in [
        program("./run-tests.sh"),
        program("bin/check"),
        path("/workspace/.venv/bin/python"),
        path("/workspace"),
        path("relative/python"),
        path("//workspace/run"),
        path("/tmp/../workspace/run"),
        path("/./workspace/run"),
        path("/proc/self/cwd/run"),
        Need::PythonModule {
            python: "python3".into(),
            module: "pytest".into(),
        },
        Need::ScriptProgram {
            program: "jest".into(),
            dir: String::new(),
        },
    ] {
        assert!(!need.is_workspace_free(), "{need:?}");
    }
}

#[test]
fn needs_found_in_an_image_are_known_for_that_image_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let need = |p: &str| Requirement {
        need: Need::Program(p.to_string()),
        by: "the check `t`".into(),
    };
    let found = FoundNeeds::new(dir.path(), "sha256:aaa");
    assert!(found.has_all(&[]));
    assert!(!found.has_all(&[need("pytest")]));
    found.record(&[need("pytest"), need("make")]);
    assert!(found.has_all(&[need("make")]));
    assert!(found.has_all(&[need("pytest"), need("make")]));
    assert!(!found.has_all(&[need("make"), need("shellcheck")]));
    found.record(&[need("shellcheck")]);
    assert!(FoundNeeds::new(dir.path(), "sha256:aaa").has_all(&[need("shellcheck"), need("make")]));
    // Another image knows nothing of them.
    assert!(!FoundNeeds::new(dir.path(), "sha256:bbb").has_all(&[need("make")]));
    // A name that would break the file's lines is never recorded.
    found.record(&[need("x\nmake")]);
    assert!(!found.has_all(&[need("x\nmake")]));
    // A file grown past its bound (by hand) is read no further than it.
    let path = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .next()
        .expect("the file")
        .path();
    let mut big = "y\n".repeat(200_000);
    big.push_str(&need("late").need.test());
    big.push('\n');
    std::fs::write(&path, big).expect("write");
    assert!(!FoundNeeds::new(dir.path(), "sha256:aaa").has_all(&[need("late")]));
}

#[test]
fn what_a_bootstrap_installs_in_the_dependency_folder_is_not_the_images_to_have() {
    let repo = tempfile::tempdir().expect("tempdir");
    let needs: Vec<Need> = requirements(
        repo.path(),
        &[],
        &["python3 -m venv /deps/venv && /deps/venv/bin/pip install -r requirements.txt".into()],
    )
    .into_iter()
    .map(|r| r.need)
    .collect();
    assert!(
        needs.contains(&Need::Program("python3".into())),
        "{needs:?}"
    );
    assert!(
        !needs
            .iter()
            .any(|n| matches!(n, Need::Path(p) if p.starts_with("/deps/"))),
        "{needs:?}"
    );
}

#[test]
fn what_the_image_alone_meets_is_remembered_and_what_a_workspace_may_change_is_looked_for_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = |need: Need| Requirement {
        need,
        by: "the check `t`".into(),
    };
    let module = |python: &str| Need::PythonModule {
        python: python.into(),
        module: "pytest".into(),
    };
    // A module is asked of the image's Python in isolated mode, which
    // leaves the working directory (the workspace) out of its path.
    let test = module("python3").image_test().expect("an image test");
    assert!(test.starts_with("python3 -I -c "), "{test}");
    assert_eq!(
        module("/usr/bin/python3")
            .image_test()
            .map(|t| t.starts_with("/usr/bin/python3 -I ")),
        Some(true)
    );
    // A Python of the workspace's, a package script's program, a program
    // in the workspace: only the workspace can tell.
    for need in [
        module(".venv/bin/python"),
        module("/workspace/.venv/bin/python"),
        Need::ScriptProgram {
            program: "jest".into(),
            dir: String::new(),
        },
        Need::Program("./run-tests.sh".into()),
    ] {
        assert_eq!(need.image_test(), None, "{need:?}");
    }
    assert_eq!(
        Need::Program("make".into()).image_test(),
        Some(Need::Program("make".into()).test())
    );

    let needs = vec![
        req(module("python3")),
        req(Need::Program("make".into())),
        req(module(".venv/bin/python")),
        req(Need::ScriptProgram {
            program: "jest".into(),
            dir: String::new(),
        }),
    ];
    let found = FoundNeeds::new(dir.path(), "sha256:aaa");
    assert_eq!(found.unknown(&needs), needs);
    // Recording what only a workspace can tell records nothing.
    found.record(&needs);
    let left = FoundNeeds::new(dir.path(), "sha256:aaa").unknown(&needs);
    assert_eq!(left, needs[2..].to_vec());
    // The file holds the isolated test, never the one a workspace could meet.
    let text = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .collect::<String>();
    assert!(text.contains(&test), "{text}");
    assert!(!text.contains(&module("python3").test()), "{text}");
    assert!(!FoundNeeds::new(dir.path(), "sha256:bbb").has_all(&needs[..1]));
}
