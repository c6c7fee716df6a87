//! Reading shell command lines without running them (for the pre-flight):
//! simple commands, their words, and the program each runs.

/// At most this much of one command is read.
const MAX_COMMAND: usize = 8 << 10;

/// Shell words that are not programs to look for.
const BUILTINS: [&str; 40] = [
    "cd", "export", "set", "unset", "test", "[", "[[", "true", "false", "echo", "printf", "exit",
    ":", ".", "source", "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
    "case", "esac", "read", "shift", "return", "local", "eval", "wait", "trap", "umask", "ulimit",
    "alias", "type", "pwd", "!",
];
/// Programs that run the next word: their own word is not the one that matters.
const WRAPPERS: [&str; 6] = ["env", "exec", "time", "nice", "nohup", "command"];

/// The program a simple command runs and its arguments, past `VAR=value`
/// assignments and wrappers; `None` for builtins and words the reading
/// cannot settle.
pub(crate) fn program_of(words: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_str();
        if is_assignment(word) {
            i += 1;
            continue;
        }
        if WRAPPERS.contains(&word) {
            i += 1;
            while i < words.len() && (words[i].starts_with('-') || is_assignment(&words[i])) {
                i += 1;
            }
            continue;
        }
        if BUILTINS.contains(&word)
            || word.contains(['$', '`', '*', '?', '(', ')', '{', '}', '<', '>'])
        {
            return None;
        }
        return Some((word, &words[i + 1..]));
    }
    None
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Splits a command line into simple commands (on `&&`, `||`, `;`, `|`, `&`
/// and newlines) of unquoted words. Parentheses and braces that open a
/// group are dropped.
pub(crate) fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let command: String = command.chars().take(MAX_COMMAND).collect();
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        q => word.push(q),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    in_word = true;
                    word.push(n);
                }
            }
            '#' if !in_word => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                end_word(&mut word, &mut in_word, &mut words);
                commands.push(std::mem::take(&mut words));
            }
            '>' | '<' => {
                // A redirection: its file descriptor and target are no words.
                if in_word && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut word, &mut in_word, &mut words);
                while chars
                    .next_if(|n| matches!(n, '>' | '<' | '&' | '|'))
                    .is_some()
                {}
                while chars.next_if(|n| *n == ' ' || *n == '\t').is_some() {}
                while chars
                    .next_if(|n| !n.is_whitespace() && !matches!(n, ';' | '&' | '|'))
                    .is_some()
                {}
            }
            ';' | '&' | '|' | '\n' => {
                end_word(&mut word, &mut in_word, &mut words);
                commands.push(std::mem::take(&mut words));
            }
            '(' | ')' | '{' | '}' => {
                if in_word && word.contains('$') {
                    word.push(c); // `$(…)`, `${…}`: left for program_of to refuse
                } else {
                    end_word(&mut word, &mut in_word, &mut words);
                }
            }
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    commands.push(words);
    commands.retain(|w| !w.is_empty());
    commands
}

pub(crate) fn safe_word(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 64
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        && !word.starts_with('-')
}

pub(crate) fn safe_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 255
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+/-".contains(c))
}

pub(crate) fn safe_relative(dir: &str) -> bool {
    !dir.starts_with('/')
        && !dir.split('/').any(|p| p == "..")
        && dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+/-".contains(c))
}

pub(crate) fn safe_module(module: &str) -> bool {
    module
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && module.len() <= 64
        && module
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
}
