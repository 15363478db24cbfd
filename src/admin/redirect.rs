//! Where a sign-in sends the browser next: a path on this server, never another origin.
//!
//! Browsers are lenient with a `Location`: they drop tabs and newlines anywhere (so
//! `/<TAB>/evil.example` is `//evil.example`), read `\` as `/`, and take `//host` as another
//! host. Only a plain path passes: a `/` not followed by `/`, and nothing but the characters
//! RFC 3986 allows unescaped in a path and query.

/// `next` if it is a plain local path (with its query), else `/`.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(path) if is_local_path(path) => path.to_owned(),
        _ => "/".to_owned(),
    }
}

fn is_local_path(path: &str) -> bool {
    let mut bytes = path.bytes();
    bytes.next() == Some(b'/')
        && path.as_bytes().get(1) != Some(&b'/')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b))
}

/// The sign-in page that comes back to `path_and_query` afterwards.
pub fn login_url(path_and_query: &str) -> String {
    format!("/login?next={}", encode(path_and_query))
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use actix_web::web::Query;

    use super::*;

    /// What the form decoder makes of a percent-encoded `next`.
    fn decoded(raw: &str) -> String {
        query(&format!("next={raw}"))
    }

    fn query(text: &str) -> String {
        let parsed = Query::<HashMap<String, String>>::from_query(text).unwrap();
        parsed.get("next").cloned().unwrap_or_default()
    }

    #[test]
    fn local_paths_with_their_query_pass() {
        for path in [
            "/",
            "/partitions/1",
            "/dead-letters?partition=0&reason=not_json",
            "/tickets/a%20b",
        ] {
            assert_eq!(safe_next(Some(path)), path);
        }
    }

    #[test]
    fn a_tab_or_newline_smuggled_as_percent_09_or_0a_is_refused() {
        for raw in [
            "/%09/evil.example",
            "/%0a/evil.example",
            "/%0D%0A/evil.example",
        ] {
            let next = decoded(raw);
            assert!(next.contains(['\t', '\n']), "{next:?}");
            assert_eq!(safe_next(Some(&next)), "/", "{raw}");
        }
        assert_eq!(safe_next(Some("/ /evil.example")), "/");
        assert_eq!(safe_next(Some("/\u{a0}/evil.example")), "/");
    }

    #[test]
    fn backslashes_and_double_slashes_are_refused() {
        for next in [
            "/\\evil.example",
            "/\\/evil.example",
            "//evil.example",
            "///evil.example",
        ] {
            assert_eq!(safe_next(Some(next)), "/", "{next}");
        }
        assert_eq!(safe_next(Some(&decoded("/%5Cevil.example"))), "/");
    }

    #[test]
    fn absolute_urls_and_other_schemes_are_refused() {
        for next in [
            "https://evil.example/",
            "http:evil.example",
            "javascript:alert(1)",
            "evil.example",
            "",
        ] {
            assert_eq!(safe_next(Some(next)), "/", "{next}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn a_login_url_brings_the_path_back_intact() {
        let target = "/dead-letters?partition=0&reason=not_json";
        let url = login_url(target);
        assert_eq!(
            url,
            "/login?next=/dead-letters%3Fpartition%3D0%26reason%3Dnot_json"
        );
        let next = query(url.strip_prefix("/login?").unwrap());
        assert_eq!(safe_next(Some(&next)), target);
    }
}
