//! Removing a directory tree without waiting for it.

use std::path::Path;

/// Removes the directories `dirs` without making this process wait for it:
/// each is first renamed beside itself (its name is free at once, and `gc`
/// takes the renamed one for what a dead run left), then one detached `rm`
/// removes them all. Where no `rm` can be started, they are removed here.
pub(crate) fn remove_detached(dirs: &[&Path]) {
    let mut renamed = Vec::new();
    for dir in dirs {
        let trash = dir.with_extension(format!("removing-{}", crate::ids::random_hex(3)));
        match std::fs::rename(dir, &trash) {
            Ok(()) => renamed.push(trash),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    if renamed.is_empty() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let spawned = ["/bin/rm", "/usr/bin/rm"]
        .into_iter()
        .find(|rm| Path::new(rm).is_file())
        .and_then(|rm| {
            std::process::Command::new(rm)
                .arg("-rf")
                .arg("--")
                .args(&renamed)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                // Not in the terminal's process group: an interrupt meant
                // for minicoder does not stop the removal.
                .process_group(0)
                .spawn()
                .ok()
        });
    match spawned {
        // Reaped if this process lives on (a session); orphaned otherwise.
        Some(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        None => {
            for dir in &renamed {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_removal_frees_the_name_at_once_and_removes_the_tree() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("run-1");
        std::fs::create_dir_all(dir.join("a/b")).expect("mkdir");
        std::fs::write(dir.join("a/b/file"), b"x").expect("write");
        remove_detached(&[&dir, &root.path().join("missing")]);
        assert!(!dir.exists(), "the name is free at once");
        // The detached removal ends (bounded wait, not a timing claim).
        let mut left = usize::MAX;
        for _ in 0..600 {
            left = std::fs::read_dir(root.path()).expect("list").count();
            if left == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(left, 0, "the renamed tree is removed");
    }
}
