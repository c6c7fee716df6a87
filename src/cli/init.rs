//! `minicoder init`: asks for each provider's key without echo (or takes
//! them from the environment with `--from-env`), writes them to the private
//! `env` file of the configuration directory, and writes a commented
//! `config.toml` with the defaults when there is none. No key is ever
//! printed: only the names of what was saved.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::process::ExitCode;

use super::env_file;
use super::{EXIT_FAILURE, EXIT_USAGE};

/// What `init` asks for, in order: the variable, whether it is a secret
/// (read without echo), and what it is.
const ITEMS: [(&str, bool, &str); 6] = [
    ("GEMINI_API_KEY", true, "Gemini API key"),
    (
        "FREELLMAPI_BASE_URL",
        false,
        "FreeLLMAPI base URL (Qwen and DeepSeek)",
    ),
    ("FREELLMAPI_API_KEY", true, "FreeLLMAPI key"),
    ("OPENAI_API_KEY", true, "OpenAI (or compatible) API key"),
    (
        "OPENAI_BASE_URL",
        false,
        "OpenAI-compatible base URL (empty: api.openai.com)",
    ),
    ("OPENAI_MODEL", false, "OpenAI model name"),
];

/// The longest answer read.
const MAX_ANSWER: usize = 8 << 10;

/// The `config.toml` written when there is none: every setting commented
/// out at its default.
pub(crate) const CONFIG_TEMPLATE: &str = r#"# minicoder's settings. A flag wins over a MINICODER_* variable, which wins over this file.

# The model runs use: "gemini", "qwen", "deepseek", "openai", or "PROVIDER:MODEL".
# Without it (and without --model or MINICODER_MODEL) runs use the free-tier chain
# gemini -> qwen -> deepseek, which needs MINICODER_FREE_TIER_CONFIRMED=true.
# A paid provider is used only when it is named here or on the command line.
# model = "openai"

# When edits are approved: "each" edit, the "final" patch, or "never".
# approval = "final"

# The colour theme of the session: default, light, high-contrast, or themes/NAME.toml here.
# theme = "default"

# Budgets of one run (flags: --max-turns, --timeout, --max-tokens, --max-cost).
# [limits]
# max_turns = 50
# timeout_seconds = 900
# command_timeout_seconds = 60
# max_tokens = 2000000
# max_cost = 1.50            # dollars; needs the model's price below

# Prices in dollars a million tokens, for the cost figures and --max-cost.
# [prices."openai:gpt-5-mini"]
# input = 0.25
# cached_input = 0.025       # optional: the input price otherwise
# output = 2.0
"#;

pub(crate) fn run(from_env: bool) -> ExitCode {
    let Some(dir) = crate::state::config_dir_from_env() else {
        err!(
            "minicoder init: no configuration directory: set HOME (or XDG_CONFIG_HOME, or MINICODER_CONFIG_DIR) to an absolute path"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    // A file others can read is refused before anything is asked.
    let path = env_file::path_in(&dir);
    let saved = match env_file::read(&path) {
        Ok(saved) => saved.unwrap_or_default(),
        Err(e) => {
            err!("minicoder init: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let answers = if from_env {
        ITEMS
            .iter()
            .filter_map(|(name, _, _)| {
                std::env::var(name)
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (name.to_string(), v.trim().to_string()))
            })
            .collect()
    } else {
        match ask(&saved) {
            Ok(answers) => answers,
            Err(e) => {
                err!("minicoder init: {e}; nothing was written");
                return ExitCode::from(EXIT_FAILURE);
            }
        }
    };
    if let Some((name, _)) = answers.iter().find(|(_, v)| v.contains(['\n', '\r', '\0'])) {
        err!("minicoder init: the value of {name} holds a line break; nothing was written");
        return ExitCode::from(EXIT_USAGE);
    }
    if answers.is_empty() {
        err!(
            "minicoder init: no key {}; {} left as it was",
            if from_env {
                "is set in the environment (GEMINI_API_KEY, FREELLMAPI_API_KEY, OPENAI_API_KEY …)"
            } else {
                "was given"
            },
            path.display()
        );
    } else {
        match env_file::write(&dir, &answers) {
            Ok(path) => {
                let names: Vec<&str> = answers.keys().map(String::as_str).collect();
                out!(
                    "saved {} in {} (mode 0600; the environment wins over it)",
                    names.join(", "),
                    path.display()
                );
            }
            Err(e) => {
                err!("minicoder init: {e}");
                return ExitCode::from(EXIT_FAILURE);
            }
        }
    }
    let config = dir.join("config.toml");
    if config.exists() {
        out!("kept {} as it was", config.display());
    } else if let Err(e) = write_config(&config) {
        err!("minicoder init: {}: {e}", config.display());
        return ExitCode::from(EXIT_FAILURE);
    } else {
        out!(
            "wrote {} with every setting at its default, commented out",
            config.display()
        );
    }
    let openai_only = answers.contains_key("OPENAI_API_KEY")
        && !["GEMINI_API_KEY", "FREELLMAPI_API_KEY"]
            .iter()
            .any(|k| answers.contains_key(*k) || saved.contains_key(*k));
    if openai_only
        && crate::state::config_value(Some(&dir), "model")
            .ok()
            .flatten()
            .is_none()
    {
        // A paid provider is never chosen for the person.
        out!(
            "runs use OpenAI when you name it: `--model openai`, or uncomment `model = \"openai\"` in {}",
            config.display()
        );
    }
    out!("next: minicoder doctor (where each key comes from), then minicoder smoke");
    ExitCode::SUCCESS
}

fn write_config(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(CONFIG_TEMPLATE.as_bytes())?;
    file.sync_all()
}

/// Asks for each item on the terminal (secrets without echo), or reads one
/// line an item from standard input when it is not a terminal. An empty
/// answer keeps what was saved (or leaves it unset).
fn ask(saved: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    let terminal = std::io::stdin().is_terminal();
    let mut answers = BTreeMap::new();
    err!("minicoder init: Enter leaves an item as it is; keys are not shown as you type.");
    for (name, secret, what) in ITEMS {
        let now = if saved.get(name).is_some_and(|v| !v.is_empty()) {
            "saved; Enter keeps it"
        } else {
            "not set; Enter skips"
        };
        let prompt = format!("{what} — {name} ({now}): ");
        let answer = if terminal && secret {
            read_hidden(&prompt)?
        } else {
            crate::terminal_text::prompt(&prompt);
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .take(MAX_ANSWER as u64 + 1)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            if !terminal {
                // (Nothing echoed what was piped in: end the prompt's line.)
                crate::terminal_text::end_prompt();
            }
            line
        };
        let answer = answer.trim();
        if answer.len() > MAX_ANSWER {
            return Err(format!("the answer for {name} is too long"));
        }
        if !answer.is_empty() {
            answers.insert(name.to_string(), answer.to_string());
        }
    }
    Ok(answers)
}

/// One line from the terminal with echo off: Enter ends it, Backspace
/// takes back a character, Ctrl-C or Ctrl-D on an empty line give up.
fn read_hidden(prompt: &str) -> Result<String, String> {
    crate::terminal_text::prompt(prompt);
    crossterm::terminal::enable_raw_mode().map_err(|e| e.to_string())?;
    let read = (|| {
        let mut text: Vec<u8> = Vec::new();
        let mut stdin = std::io::stdin().lock();
        let mut byte = [0u8; 1];
        loop {
            if stdin.read(&mut byte).map_err(|e| e.to_string())? == 0 {
                return Ok(text);
            }
            match byte[0] {
                b'\r' | b'\n' => return Ok(text),
                3 => return Err("cancelled".to_string()),
                4 if text.is_empty() => return Err("cancelled".to_string()),
                8 | 127 => {
                    // A whole UTF-8 character.
                    while let Some(b) = text.pop() {
                        if b & 0xC0 != 0x80 {
                            break;
                        }
                    }
                }
                b if b >= 0x20 => {
                    if text.len() >= MAX_ANSWER {
                        return Err("the answer is too long".to_string());
                    }
                    text.push(b);
                }
                _ => {}
            }
        }
    })();
    let _ = crossterm::terminal::disable_raw_mode();
    crate::terminal_text::end_prompt();
    read.map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_template_parses_and_sets_nothing() {
        let table: toml::Table = CONFIG_TEMPLATE.parse().expect("valid TOML");
        assert!(table.is_empty(), "every setting is commented out");
        // Uncommented, every line is a setting minicoder reads.
        let uncommented: String = CONFIG_TEMPLATE
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.starts_with('[') || l.contains(" = "))
            .map(|l| format!("{l}\n"))
            .collect();
        let table: toml::Table = uncommented.parse().expect("valid when uncommented");
        for key in ["model", "approval", "theme", "limits", "prices"] {
            assert!(table.contains_key(key), "{key}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), &uncommented).unwrap();
        let prices = crate::state::prices(Some(dir.path())).expect("the prices read");
        assert_eq!(prices.0.len(), 1);
        crate::state::config_limits(Some(dir.path())).expect("the limits read");
    }
}
