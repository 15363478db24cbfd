//! The repository's own files and the binary's help, for the tests that check the docs, the
//! manifests and the generated references against the code.

use std::path::Path;
use std::process::Command;

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository, by its path from the root.
pub fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// What `history-consumer run --help` prints.
pub fn help_of_run() -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args(["run", "--help"])
        .output()
        .expect("history-consumer run --help");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 help")
}

/// Whether `flag` appears in `text` as a whole flag (not as the start of a longer one).
pub fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        text[at + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}
