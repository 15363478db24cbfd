//! The layout as `src/lib.rs` states it: every module uses only modules of the layers below it,
//! and the service never uses the tools. Read from the source files themselves.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The service's layers, bottom up, as `src/lib.rs` lists them.
/// The layers as `src/lib.rs` lists them, bottom up: each numbered item of its documentation
/// is a layer, the modules it links (`[`name`]`) are its members.
fn layers() -> Vec<Vec<String>> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).expect("src/lib.rs");
    let mut layers: Vec<Vec<String>> = Vec::new();
    for line in text.lines().map_while(|l| l.strip_prefix("//!")) {
        let item = line.trim_start();
        if item.is_empty() {
            if layers.is_empty() {
                continue;
            }
            break;
        }
        let numbered = item
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if numbered {
            layers.push(Vec::new());
        } else if layers.is_empty() || !line.starts_with("    ") {
            continue;
        }
        let layer = layers.last_mut().expect("a layer");
        let mut rest = item;
        while let Some(at) = rest.find("[`") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find("`]") else { break };
            layer.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    layers
}

/// Inside `actors`, the same rule: status and messages below the actors that exchange them.
const ACTOR_LAYERS: [&[&str]; 6] = [
    &["status"],
    &["messages"],
    &["checkpoint"],
    &["partition"],
    &["supervisor"],
    &["monitor"],
];

fn layer_of<S: AsRef<str>>(layers: &[impl AsRef<[S]>], module: &str) -> Option<usize> {
    layers
        .iter()
        .position(|layer| layer.as_ref().iter().any(|m| m.as_ref() == module))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The first path segment under `src/` (`src/inbox/batch.rs` → `inbox`, `src/work.rs` → `work`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// The names used after `prefix` in `text`, e.g. `crate::` → {"domain", "inbox"}.
fn uses_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            let tail = &rest[at + prefix.len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
            rest = tail;
        }
    }
    used
}

#[test]
fn every_module_uses_only_the_layers_below_it_and_never_the_tools() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = layers();
    assert!(
        layers.len() >= 10,
        "src/lib.rs lists its layers: {layers:?}"
    );
    let mut wrong = Vec::new();
    for file in rust_files(&src) {
        let module = module_of(&src, &file);
        // The binary's edge: its command line names the tools' commands too.
        if ["main", "lib", "cli", "tools"].contains(&module.as_str()) {
            continue;
        }
        let layer = layer_of(&layers, &module)
            .unwrap_or_else(|| panic!("{module} is in no layer: add it to the list in lib.rs"));
        let text = std::fs::read_to_string(&file).expect("a source file");
        for used in uses_after(&text, "crate::") {
            if used == module {
                continue;
            }
            match layer_of(&layers, &used) {
                Some(below) if below < layer => {}
                Some(_) => wrong.push(format!("{} uses {used}", file.display())),
                None if used == "tools" => wrong.push(format!("{} uses the tools", file.display())),
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn inside_the_actors_messages_and_status_sit_below_the_actors() {
    let actors = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/actors");
    let mut wrong = Vec::new();
    for file in rust_files(&actors) {
        let module = module_of(&actors, &file);
        let Some(layer) = layer_of(&ACTOR_LAYERS, &module) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file");
        let used = uses_after(&text, "super::")
            .into_iter()
            .chain(uses_after(&text, "crate::actors::"));
        for used in used {
            match layer_of(&ACTOR_LAYERS, &used) {
                Some(below) if below < layer || used == module => {}
                Some(_) => wrong.push(format!("{} uses actors::{used}", file.display())),
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}

/// The modules a numbered item of the layout section of `docs/architecture.md` names by path
/// (`src/domain/`, `src/watermark.rs`), item by item.
fn documented_layers() -> Vec<Vec<String>> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let text = std::fs::read_to_string(page).expect("docs/architecture.md");
    let section = text
        .split("\n## Layout\n")
        .nth(1)
        .expect("a layout section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let mut layers: Vec<Vec<String>> = Vec::new();
    for line in section.lines() {
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if numbered {
            layers.push(Vec::new());
        } else if layers.is_empty() || !line.starts_with("   ") {
            if !layers.is_empty() {
                break;
            }
            continue;
        }
        let layer = layers.last_mut().expect("a layer");
        let mut rest = line;
        while let Some(at) = rest.find("`src/") {
            let tail = &rest[at + 5..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let top_level =
                tail[name.len()..].starts_with('/') || tail[name.len()..].starts_with(".rs`");
            if top_level && !layer.contains(&name) {
                layer.push(name);
            }
            rest = tail;
        }
    }
    layers
}

#[test]
fn the_architecture_page_draws_the_same_layers_as_lib_rs() {
    let modules = |layers: Vec<Vec<String>>| -> Vec<Vec<String>> {
        layers
            .into_iter()
            .map(|mut layer| {
                layer.sort();
                layer
            })
            .collect()
    };
    assert_eq!(modules(documented_layers()), modules(layers()));
}
