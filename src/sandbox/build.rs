//! What every image build shares: the machine-wide build lock, the build
//! context, and following a build's output.

use futures_util::StreamExt;

use super::SandboxError;

/// The longest build-output line shown as progress, in characters.
pub(crate) const PROGRESS_LINE_CHARS: usize = 200;

/// What a build reports while it works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildProgress {
    /// A new step: `step` of `total`.
    Step { step: u8, total: u8, what: String },
    /// A line of the builder's own output.
    Line(String),
}

/// An exclusive machine-wide lock (the image is machine-wide, whatever state
/// directory a process uses), held while building.
pub(crate) struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    pub(crate) async fn acquire(
        progress: &mut (dyn FnMut(BuildProgress) + Send),
    ) -> Result<Self, SandboxError> {
        use rustix::fs::{FlockOperation, flock};
        let path = std::env::temp_dir().join("minicoder-sandbox-build.lock");
        let fail = |e: std::io::Error| {
            SandboxError::ImageBuild(format!("locking {}: {e}", path.display()))
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(fail)?;
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            return Ok(Self { _file: file });
        }
        progress(BuildProgress::Line(
            "another minicoder process is building the image; waiting for it".into(),
        ));
        let file = tokio::task::spawn_blocking(move || {
            flock(&file, FlockOperation::LockExclusive).map(|_| file)
        })
        .await
        .map_err(|e| SandboxError::ImageBuild(format!("waiting for the build lock: {e}")))?
        .map_err(|e| fail(e.into()))?;
        Ok(Self { _file: file })
    }
}

/// A build context holding `files` (name, content), all mode 0644.
pub(crate) fn pack_context(files: &[(&str, &[u8])]) -> Result<Vec<u8>, SandboxError> {
    let fail =
        |e: std::io::Error| SandboxError::ImageBuild(format!("packing the build context: {e}"));
    let mut context = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        context
            .append_data(&mut header, name, *bytes)
            .map_err(fail)?;
    }
    context.finish().map_err(fail)?;
    context.into_inner().map_err(fail)
}

/// Follows a build to its end, forwarding its output lines; the first error ends it.
pub(crate) async fn forward_build(
    stream: impl futures_util::Stream<Item = Result<bollard::models::BuildInfo, bollard::errors::Error>>,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| SandboxError::ImageBuild(e.to_string()))?;
        if let Some(err) = info.error_detail.and_then(|d| d.message) {
            return Err(SandboxError::ImageBuild(err));
        }
        if let Some(line) = info
            .stream
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            // A recipe's output is the repository's: no escape sequence of
            // it reaches the terminal.
            progress(BuildProgress::Line(crate::terminal_text::clean_line(
                line,
                PROGRESS_LINE_CHARS,
            )));
        }
    }
    Ok(())
}
