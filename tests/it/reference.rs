//! The generated reference pages of `docs/` are what the code generates today, and the
//! configuration reference names every flag `run --help` prints. Regenerate the pages with
//! `scripts/docs-generate`.

use history_consumer::tools::reference::Page;

use crate::support::repo::{self, help_of_run, names_flag, read};

/// The first line where two texts part, for a message short enough to read.
fn first_difference(stored: &str, generated: &str) -> String {
    let mut stored_lines = stored.lines();
    let mut generated_lines = generated.lines();
    for number in 1.. {
        match (stored_lines.next(), generated_lines.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!("line {number}:\n  stored:    {a:?}\n  generated: {b:?}");
            }
        }
    }
    "only the line endings differ".to_owned()
}

fn assert_up_to_date(page: Page) {
    let generated = page.render().expect("the page renders");
    let stored = read(page.path());
    assert!(
        stored == generated,
        "{} differs from what the code generates: run scripts/docs-generate\n{}",
        page.path(),
        first_difference(&stored, &generated)
    );
}

#[test]
fn the_configuration_reference_is_generated_from_the_command_line() {
    assert_up_to_date(Page::Configuration);
}

#[test]
fn the_metrics_reference_is_generated_from_the_registry_and_the_rules() {
    assert_up_to_date(Page::Metrics);
}

/// The `--flags` a text names, each once, in order.
fn long_flags(text: &str) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let tail = &rest[at + 2..];
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let starts_a_word = at == 0 || !rest[..at].ends_with(|c: char| c.is_ascii_alphanumeric());
        if starts_a_word && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            let flag = format!("--{}", name.trim_end_matches('-'));
            if !flags.contains(&flag) {
                flags.push(flag);
            }
        }
        rest = &tail[name.len()..];
    }
    flags
}

#[test]
fn every_flag_of_run_help_is_in_the_configuration_reference() {
    let help = help_of_run();
    let flags = long_flags(&help);
    assert!(
        flags.len() > 40 && flags.contains(&"--help".to_owned()),
        "{flags:?}"
    );
    let reference = read(Page::Configuration.path());
    let run = reference
        .split("\n## history-consumer run\n")
        .nth(1)
        .expect("a section for run")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let missing: Vec<&String> = flags
        .iter()
        .filter(|flag| !names_flag(&reference, flag))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not name {missing:?}: run scripts/docs-generate"
    );
    // Each of run's own flags has its row in run's table, not only a mention.
    for flag in flags
        .iter()
        .filter(|f| !["--help", "--version"].contains(&f.as_str()))
    {
        if help.contains(&format!("      {flag}")) || help.contains(&format!(", {flag}")) {
            assert!(
                run.contains(&format!("| `{flag}`")) || run.contains(&format!("| `{flag} ")),
                "run's table has no row for {flag}"
            );
        }
    }
}

/// The text of a markdown page outside its fenced code blocks.
fn outside_code(text: &str) -> String {
    let mut inside = false;
    let mut kept = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// The anchors of a page's headings, as GitHub makes them.
fn anchors(text: &str) -> Vec<String> {
    outside_code(text)
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

#[test]
fn every_link_of_the_readme_and_docs_reaches_a_file_and_a_heading() {
    let root = repo::root();
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() >= 10, "{pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let text = outside_code(&text);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            let link = &tail[..end];
            rest = &tail[end..];
            if link.contains("://") || link.contains(' ') {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(file)
            };
            let name = format!("{}: {link}", page.strip_prefix(root).unwrap().display());
            if !target.exists() {
                broken.push(format!("{name} (no such file)"));
            } else if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let heading = std::fs::read_to_string(&target).expect("a page");
                if !anchors(&heading).iter().any(|a| a == anchor) {
                    broken.push(format!("{name} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_stays_short_with_its_two_commands_and_a_link_to_every_page_of_docs() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: keep it to what the service is, the two commands, the \
         tour and the links (at most 250); move the rest to docs/"
    );
    for command in ["cargo run --release -- demo", "scripts/test "] {
        assert!(readme.contains(command), "README.md lost `{command}`");
    }
    let docs = repo::root().join("docs");
    for entry in std::fs::read_dir(docs).expect("docs/") {
        let name = entry.expect("an entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            assert!(
                readme.contains(&format!("(docs/{name})")),
                "README.md does not link docs/{name}"
            );
        }
    }
}
