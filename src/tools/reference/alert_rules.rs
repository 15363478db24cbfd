//! The alert rules of `deploy/alerts.yml`, read for `docs/metrics.md`. The file is read with
//! the few YAML forms it uses — mappings by indentation, a list of rules, plain and
//! double-quoted scalars, literal (`|`) and folded (`>-`) blocks, comments — and anything else
//! is an error naming its line, so the page cannot silently leave a rule out. `promtool`
//! checks the file itself (`tests/it/deploy.rs`).

/// The rules file, as built into the binary.
pub const ALERTS_YML: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/alerts.yml"));

/// One alert rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRule {
    pub name: String,
    pub expr: String,
    /// How long the expression must hold before the alert fires (`for`), if at all.
    pub after: Option<String>,
    pub severity: String,
    pub summary: String,
    pub description: String,
    /// The comment lines inside the rule: why it is written as it is.
    pub notes: Vec<String>,
}

/// The rules file holds something this reader does not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deploy/alerts.yml line {line}: {message}")]
pub struct RulesError {
    pub line: usize,
    pub message: String,
}

/// A line of the file: its number (from 1), indentation and text without it.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    number: usize,
    indent: usize,
    text: &'a str,
}

/// A value: a scalar, or a mapping of keys to values.
#[derive(Debug)]
enum Value {
    Text(String),
    Map(Vec<(String, Value, usize)>),
}

/// The rules of every group, in the file's order.
pub fn parse(yaml: &str) -> Result<Vec<AlertRule>, RulesError> {
    let lines: Vec<Line> = yaml
        .lines()
        .enumerate()
        .map(|(at, raw)| {
            let text = raw.trim_start();
            Line {
                number: at + 1,
                indent: raw.len() - text.len(),
                text: text.trim_end(),
            }
        })
        .collect();
    let mut rules = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        let Some(first) = line.text.strip_prefix("- alert:") else {
            at += 1;
            continue;
        };
        // The rule's keys sit two columns right of its dash.
        let indent = line.indent + 2;
        let end = lines[at + 1..]
            .iter()
            .position(|l| !l.text.is_empty() && l.indent < indent)
            .map_or(lines.len(), |p| at + 1 + p);
        let body = &lines[at + 1..end];
        let notes = body
            .iter()
            .filter_map(|l| l.text.strip_prefix('#'))
            .map(|note| note.trim().to_owned())
            .collect();
        let keys = mapping(body, indent)?;
        rules.push(rule(line, scalar(first, line)?, &keys, notes)?);
        at = end;
    }
    if rules.is_empty() {
        return Err(RulesError {
            line: 1,
            message: "no `- alert:` rule".to_owned(),
        });
    }
    Ok(rules)
}

fn rule(
    line: Line,
    name: String,
    keys: &[(String, Value, usize)],
    notes: Vec<String>,
) -> Result<AlertRule, RulesError> {
    let missing = |what: &str| RulesError {
        line: line.number,
        message: format!("the rule {name} has no {what}"),
    };
    let text = |map: &[(String, Value, usize)], key: &str| {
        map.iter()
            .find(|(k, _, _)| k == key)
            .and_then(|(_, value, _)| match value {
                Value::Text(text) => Some(text.clone()),
                Value::Map(_) => None,
            })
    };
    let map = |key: &str| {
        keys.iter().find_map(|(k, value, _)| match value {
            Value::Map(map) if k == key => Some(map.as_slice()),
            _ => None,
        })
    };
    let labels = map("labels").ok_or_else(|| missing("labels"))?;
    let annotations = map("annotations").ok_or_else(|| missing("annotations"))?;
    Ok(AlertRule {
        expr: text(keys, "expr").ok_or_else(|| missing("expr"))?,
        after: text(keys, "for"),
        severity: text(labels, "severity").ok_or_else(|| missing("severity label"))?,
        summary: text(annotations, "summary").ok_or_else(|| missing("summary"))?,
        description: text(annotations, "description").ok_or_else(|| missing("description"))?,
        notes,
        name,
    })
}

/// The mapping whose keys sit at `indent` in `lines` (comments and blank lines skipped).
fn mapping(lines: &[Line], indent: usize) -> Result<Vec<(String, Value, usize)>, RulesError> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        if line.text.is_empty() || line.text.starts_with('#') {
            at += 1;
            continue;
        }
        let wrong = |message: &str| RulesError {
            line: line.number,
            message: message.to_owned(),
        };
        if line.indent != indent {
            return Err(wrong("a key out of line with the ones before it"));
        }
        let (key, rest) = line
            .text
            .split_once(':')
            .ok_or_else(|| wrong("a line that is no `key: value`"))?;
        let rest = rest.trim();
        // The value's own lines: every following one indented deeper (or blank).
        let end = lines[at + 1..]
            .iter()
            .position(|l| !l.text.is_empty() && l.indent <= indent)
            .map_or(lines.len(), |p| at + 1 + p);
        let inner = &lines[at + 1..end];
        let value = match rest {
            "" => {
                let deeper = inner
                    .iter()
                    .find(|l| !l.text.is_empty() && !l.text.starts_with('#'))
                    .ok_or_else(|| wrong("a key without a value"))?;
                Value::Map(mapping(inner, deeper.indent)?)
            }
            "|" | "|-" => Value::Text(block(inner, "\n")),
            ">" | ">-" => Value::Text(block(inner, " ")),
            _ if !inner
                .iter()
                .all(|l| l.text.is_empty() || l.text.starts_with('#')) =>
            {
                return Err(wrong("a scalar continued on the next lines"));
            }
            _ => Value::Text(scalar(rest, line)?),
        };
        entries.push((key.trim().to_owned(), value, line.number));
        at = end;
    }
    Ok(entries)
}

/// A block scalar's lines joined by `separator` (a newline for `|`, a space for `>`), a blank
/// line kept as a paragraph break.
fn block(lines: &[Line], separator: &str) -> String {
    let mut text = String::new();
    for line in lines {
        if line.text.is_empty() {
            text.push_str("\n\n");
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push_str(separator);
            }
            text.push_str(line.text);
        }
    }
    text.trim().to_owned()
}

/// A plain or double-quoted scalar.
fn scalar(text: &str, line: Line) -> Result<String, RulesError> {
    let text = text.trim();
    let Some(quoted) = text.strip_prefix('"') else {
        if text.starts_with(['\'', '&', '*', '!', '[', '{']) {
            return Err(RulesError {
                line: line.number,
                message: format!("a value this reader does not take: {text}"),
            });
        }
        return Ok(text.to_owned());
    };
    let mut value = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(value),
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some(escaped @ ('"' | '\\')) => value.push(escaped),
                other => {
                    return Err(RulesError {
                        line: line.number,
                        message: format!("an escape this reader does not take: \\{other:?}"),
                    });
                }
            },
            _ => value.push(c),
        }
    }
    Err(RulesError {
        line: line.number,
        message: "a quoted value that does not end".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = r#"
groups:
  - name: g
    rules:
      - alert: First
        # Why it is so.
        expr: |
          a > 1
          or b
        for: 2m
        labels:
          severity: critical
        annotations:
          summary: "First on {{ $labels.instance }} says \"hi\""
          description: >-
            One line
            and the next.

      - alert: Second
        expr: up == 0
        labels:
          severity: warning
        annotations:
          summary: plain
          description: >-
            Text.
"#;

    #[test]
    fn reads_every_rule_with_its_blocks_quotes_and_notes() {
        let rules = parse(RULES).expect("rules");
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[0],
            AlertRule {
                name: "First".to_owned(),
                expr: "a > 1\nor b".to_owned(),
                after: Some("2m".to_owned()),
                severity: "critical".to_owned(),
                summary: "First on {{ $labels.instance }} says \"hi\"".to_owned(),
                description: "One line and the next.".to_owned(),
                notes: vec!["Why it is so.".to_owned()],
            }
        );
        assert_eq!(rules[1].after, None);
        assert_eq!(rules[1].expr, "up == 0");
    }

    #[test]
    fn a_rule_without_a_severity_is_an_error_naming_its_line() {
        let text = RULES.replace("          severity: warning\n", "          team: x\n");
        let error = parse(&text).expect_err("no severity");
        assert_eq!(error.line, 19, "{error}");
        assert!(error.to_string().contains("Second"), "{error}");
    }

    #[test]
    fn the_repositorys_rules_are_read() {
        let rules = parse(ALERTS_YML).expect("deploy/alerts.yml");
        let count = ALERTS_YML.matches("- alert:").count();
        assert_eq!(rules.len(), count);
        assert!(
            rules
                .iter()
                .all(|r| !r.expr.is_empty() && !r.summary.is_empty())
        );
    }
}
