//! A mutational fuzzer on stable Rust for the parsers that take hostile
//! input (`minicoder::fuzz_targets`): each target runs for `FUZZ_SECONDS`
//! (default 600) from its committed corpus (`benches/corpus/TARGET/`),
//! inputs mutated byte- and token-wise, an input kept when it leads to an
//! outcome not seen before. A panic — a crash or a broken property — is
//! saved as `crash-HASH` in the corpus folder and fails the run; new
//! inputs worth keeping are written there too.
//!
//! Run: `cargo bench --bench fuzz` (`FUZZ_TARGETS=sse,redact` for some).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use minicoder::fuzz_targets;
use sha2::{Digest, Sha256};

const MAX_INPUT: usize = 64 * 1024;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that matter to each parser, inserted whole.
fn dictionary(target: &str) -> Vec<&'static [u8]> {
    let common: [&[u8]; 6] = [b"\n", b"\0", b"\"", b"\\", b"\xff", b"\xe2\x80\xae"];
    let own: &[&[u8]] = match target {
        "unified_diff" => &[
            b"--- a/f\n", b"+++ b/f\n", b"--- /dev/null\n", b"+++ /dev/null\n", b"@@ -1,3 +1,3 @@\n",
            b"@@ -0,0 +1 @@\n", b"@@ -99999999999999999999,1 +1 @@\n", b"\\ No newline at end of file\n",
            b"\n+", b"\n-", b"\n ", b"\r\n",
        ],
        "sse" => &[
            b"data: ", b"data: [DONE]\n\n", b"\n\n", b"{\"choices\":[{\"index\":0,\"delta\":{",
            b"\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"read_file\",\"arguments\":\"",
            b"\"content\":\"", b"\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}", b"\"error\":{\"message\":\"x\"}",
            b"}]}", b"\"finish_reason\":\"tool_calls\"", b"\"reasoning_content\":\"", b"18446744073709551616",
        ],
        "project_config" => &[
            b"{\"verification\":[", b"{\"name\":\"t\",\"command\":\"true\"}", b"\"bootstrap\":[\"x\"]",
            b"\"secret_paths\":[\"**\"]", b"\"image\":\"", b"\"packages\":[", b"\"limits\":{", b"]}", b",",
        ],
        "git_path" => &[b"/", b".git", b".GIT", b"..", b".", b".gitmodules", b"git~1", b"\xe2\x80\x8c", b".git\xe2\x80\x8c"],
        "redact" => &[
            b"sk-", b"sk-proj-", b"ghp_", b"AKIA", b"Bearer ", b"api_key=", b"-----BEGIN PRIVATE KEY-----",
            b"AIza", b"xoxb-", b"password=", b"\x1b[31m",
        ],
        _ => &[],
    };
    common.iter().chain(own.iter()).copied().collect()
}

fn mutate(input: &[u8], corpus: &[Vec<u8>], dict: &[&[u8]], rng: &mut Rng) -> Vec<u8> {
    let mut d = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(d.len() + 1);
        match rng.below(8) {
            0 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] = *[
                    0u8, 0xff, b'\n', b'-', b'+', b'@', b'"', b'\\', 0x80, b'/', b'.',
                ]
                .get(rng.below(11))
                .unwrap_or(&0);
            }
            2 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                d.splice(at..at, bytes);
            }
            3 if !d.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(d.len());
                d.drain(at.min(end)..end);
            }
            4 if !d.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(d.len());
                let piece = d[at.min(end)..end].to_vec();
                let to = rng.below(d.len() + 1);
                d.splice(to..to, piece);
            }
            5 => {
                let token = dict[rng.below(dict.len())];
                d.splice(at..at, token.iter().copied());
            }
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                d.truncate(at);
                d.extend_from_slice(&other[from..]);
            }
            _ => {
                // A line moved: the structure of line-based formats shuffled.
                let lines: Vec<&[u8]> = d.split(|b| *b == b'\n').collect();
                if lines.len() > 1 {
                    let a = rng.below(lines.len());
                    let b = rng.below(lines.len());
                    let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
                    l.swap(a, b);
                    d = l.join(&b'\n');
                }
            }
        }
    }
    d.truncate(MAX_INPUT);
    d
}

fn hash(data: &[u8]) -> String {
    hex::encode(&Sha256::digest(data)[..8])
}

fn load(dir: &Path) -> Vec<Vec<u8>> {
    let mut seeds: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with("crash-"))
                .filter_map(|e| Some((e.path(), std::fs::read(e.path()).ok()?)))
                .collect()
        })
        .unwrap_or_default();
    seeds.sort();
    let mut out: Vec<Vec<u8>> = seeds.into_iter().map(|(_, d)| d).collect();
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

fn main() {
    let seconds: u64 = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let chosen: Vec<String> = std::env::var("FUZZ_TARGETS")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_else(|_| {
            fuzz_targets::TARGETS
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    std::panic::set_hook(Box::new(|_| {}));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/corpus");
    let mut crashed = 0;
    println!("fuzzing {} s a target, seed {seed}", seconds);
    for target in &chosen {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus folder");
        let mut corpus = load(&dir);
        let seeds = corpus.len();
        let dict = dictionary(target);
        let mut seen: BTreeSet<String> = corpus
            .iter()
            .map(|c| fuzz_targets::outcome(target, c))
            .collect();
        let mut rng = Rng(seed ^ hash(target.as_bytes()).len() as u64 ^ 0x9e37_79b9_7f4a_7c15);
        let mut fresh: Vec<Vec<u8>> = Vec::new();
        let mut crashes: BTreeSet<String> = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let mut execs: u64 = 0;
        while Instant::now() < deadline {
            for _ in 0..64 {
                let base = &corpus[rng.below(corpus.len())];
                let input = mutate(base, &corpus, &dict, &mut rng);
                execs += 1;
                let ran = catch_unwind(AssertUnwindSafe(|| fuzz_targets::run(target, &input)));
                if let Err(p) = ran {
                    let name = format!("crash-{}", hash(&input));
                    if crashes.insert(name.clone()) {
                        std::fs::write(dir.join(&name), &input).expect("save the crash");
                        println!("  {target}: CRASH {}: {}", name, panic_text(&*p));
                    }
                    continue;
                }
                let outcome = fuzz_targets::outcome(target, &input);
                if seen.insert(outcome) {
                    corpus.push(input.clone());
                    fresh.push(input);
                }
            }
        }
        // Keep the smallest new inputs (at most 32 a run) for next time.
        fresh.sort_by_key(Vec::len);
        for input in fresh.iter().take(32) {
            let _ = std::fs::write(dir.join(hash(input)), input);
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "  {target}: {execs} inputs in {secs:.0} s ({:.0}/s), {seeds} seeds, {} outcomes, {} new inputs kept, {} crashes",
            execs as f64 / secs,
            seen.len(),
            fresh.len().min(32),
            crashes.len()
        );
        crashed += crashes.len();
    }
    assert_eq!(crashed, 0, "crashes saved as crash-* in benches/corpus");
}
