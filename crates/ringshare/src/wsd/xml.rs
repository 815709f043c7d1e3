//! A small, bounded, namespace-aware XML reader for the SOAP envelopes of
//! WS-Discovery: elements, attributes, text, CDATA, comments and processing
//! instructions. A document type declaration is refused (no entities beyond
//! the five predefined ones and character references, so nothing expands),
//! and so is anything past [`MAX_ELEMENTS`] elements or [`MAX_DEPTH`] levels.
//! Every error is a `None`: the caller drops the message.

/// At most this many elements in a document.
pub const MAX_ELEMENTS: usize = 512;
/// At most this many levels of nesting.
pub const MAX_DEPTH: usize = 32;
/// At most this many attributes on one element.
const MAX_ATTRIBUTES: usize = 32;
/// At most this many namespace bindings in scope (each element keeps a copy).
const MAX_BINDINGS: usize = 64;

/// One element: its namespace (resolved) and local name, its text (the
/// concatenated character data directly inside it, trimmed), its children,
/// and the namespace bindings in scope (to resolve QNames in its text).
#[derive(Debug, Clone, Default)]
pub struct Element {
    pub ns: String,
    pub local: String,
    pub text: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<usize>,
    bindings: Vec<(String, String)>,
}

/// A parsed document: element 0 is the root.
#[derive(Debug)]
pub struct Doc {
    pub elements: Vec<Element>,
}

impl Doc {
    pub fn root(&self) -> &Element {
        &self.elements[0]
    }

    /// The first child of `e` named `{ns}local`.
    pub fn child<'a>(&'a self, e: &Element, ns: &str, local: &str) -> Option<&'a Element> {
        e.children
            .iter()
            .map(|&i| &self.elements[i])
            .find(|c| c.ns == ns && c.local == local)
    }

    /// The first child element of `e`, whatever its name.
    pub fn first_child<'a>(&'a self, e: &Element) -> Option<&'a Element> {
        e.children.first().map(|&i| &self.elements[i])
    }

    /// The element at the end of `path` from `e`, each step `(ns, local)`.
    pub fn path<'a>(&'a self, e: &'a Element, path: &[(&str, &str)]) -> Option<&'a Element> {
        path.iter()
            .try_fold(e, |cur, (ns, local)| self.child(cur, ns, local))
    }
}

impl Element {
    /// The namespace a prefix is bound to where this element is (`""`: the default one).
    pub fn namespace_of(&self, prefix: &str) -> Option<&str> {
        self.bindings
            .iter()
            .rev()
            .find(|(p, _)| p == prefix)
            .map(|(_, u)| u.as_str())
    }

    /// This element's text read as a list of QNames, resolved to `(namespace, local)`; a
    /// prefix bound to nothing resolves to an empty namespace (matching nothing).
    pub fn qnames(&self) -> Vec<(String, String)> {
        self.text
            .split_ascii_whitespace()
            .map(|q| {
                let (prefix, local) = q.split_once(':').unwrap_or(("", q));
                let ns = self.namespace_of(prefix).unwrap_or("");
                (ns.to_string(), local.to_string())
            })
            .collect()
    }
}

struct Reader<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }
    /// Skip past the next `end`; false when there is none.
    fn skip_past(&mut self, end: &str) -> bool {
        match self.rest().find(end) {
            Some(i) => {
                self.pos += i + end.len();
                true
            }
            None => false,
        }
    }
    fn skip_ws(&mut self) {
        let n = self.rest().len() - self.rest().trim_start().len();
        self.pos += n;
    }
    fn name(&mut self) -> Option<&'a str> {
        let r = self.rest();
        let n = r
            .find(|c: char| c.is_whitespace() || matches!(c, '>' | '/' | '=' | '<'))
            .unwrap_or(r.len());
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some(&r[..n])
    }
}

/// Character data with its references replaced; `None` for an unknown entity.
fn unescape(raw: &str) -> Option<String> {
    if !raw.contains('&') {
        return Some(raw.to_string());
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let end = after.find(';')?;
        let ent = &after[..end];
        let c = match ent {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let n = if let Some(h) = ent.strip_prefix("#x") {
                    u32::from_str_radix(h, 16).ok()?
                } else {
                    ent.strip_prefix('#')?.parse().ok()?
                };
                char::from_u32(n)?
            }
        };
        out.push(c);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// A start tag's attributes up to `>` or `/>`; returns them and whether the tag closed itself.
fn attributes(r: &mut Reader) -> Option<(Vec<(String, String)>, bool)> {
    let mut attrs = Vec::new();
    loop {
        r.skip_ws();
        if r.eat("/>") {
            return Some((attrs, true));
        }
        if r.eat(">") {
            return Some((attrs, false));
        }
        let name = r.name()?;
        r.skip_ws();
        if !r.eat("=") {
            return None;
        }
        r.skip_ws();
        let quote = if r.eat("\"") {
            "\""
        } else if r.eat("'") {
            "'"
        } else {
            return None;
        };
        let end = r.rest().find(quote)?;
        let raw = &r.rest()[..end];
        if raw.contains('<') {
            return None;
        }
        attrs.push((name.to_string(), unescape(raw)?));
        r.pos += end + 1;
        if attrs.len() > MAX_ATTRIBUTES {
            return None;
        }
    }
}

/// Split `prefix:local`.
fn split_qname(q: &str) -> (&str, &str) {
    q.split_once(':').unwrap_or(("", q))
}

/// Parse `bytes` (UTF-8) as one XML document within the bounds above.
pub fn parse(bytes: &[u8]) -> Option<Doc> {
    let s = std::str::from_utf8(bytes).ok()?;
    let s = s.strip_prefix('\u{feff}').unwrap_or(s);
    let mut r = Reader { s, pos: 0 };
    let mut elements: Vec<Element> = Vec::new();
    // Open elements: index and the raw tag name its end tag must repeat.
    let mut open: Vec<(usize, &str)> = Vec::new();
    let mut done = false;
    while r.pos < s.len() {
        if !r.rest().starts_with('<') {
            let end = r.rest().find('<').unwrap_or(r.rest().len());
            let raw = &r.rest()[..end];
            r.pos += end;
            match open.last() {
                Some(&(i, _)) => elements[i].text.push_str(&unescape(raw)?),
                None if raw.trim().is_empty() => {}
                None => return None,
            }
            continue;
        }
        if r.eat("<?") {
            if !r.skip_past("?>") {
                return None;
            }
        } else if r.eat("<!--") {
            if !r.skip_past("-->") {
                return None;
            }
        } else if r.eat("<![CDATA[") {
            let end = r.rest().find("]]>")?;
            let &(i, _) = open.last()?;
            elements[i].text.push_str(&r.rest()[..end]);
            r.pos += end + 3;
        } else if r.rest().starts_with("<!") {
            // DOCTYPE and the like: refused (no entity definitions are read).
            return None;
        } else if r.eat("</") {
            let name = r.name()?;
            r.skip_ws();
            if !r.eat(">") {
                return None;
            }
            let (_, expected) = open.pop()?;
            if expected != name {
                return None;
            }
            done = open.is_empty();
        } else {
            r.pos += 1;
            if done {
                return None; // a second root
            }
            let raw_name = r.name()?;
            let (attrs, empty) = attributes(&mut r)?;
            let mut bindings = open
                .last()
                .map(|&(i, _)| elements[i].bindings.clone())
                .unwrap_or_default();
            for (k, v) in &attrs {
                if k == "xmlns" {
                    bindings.push((String::new(), v.clone()));
                } else if let Some(p) = k.strip_prefix("xmlns:") {
                    bindings.push((p.to_string(), v.clone()));
                }
            }
            if bindings.len() > MAX_BINDINGS {
                return None;
            }
            let (prefix, local) = split_qname(raw_name);
            let mut e = Element {
                local: local.to_string(),
                attrs,
                bindings,
                ..Default::default()
            };
            e.ns = match e.namespace_of(prefix) {
                Some(ns) => ns.to_string(),
                None if prefix.is_empty() => String::new(),
                None => return None, // an unbound prefix
            };
            let idx = elements.len();
            if idx >= MAX_ELEMENTS {
                return None;
            }
            if let Some(&(parent, _)) = open.last() {
                elements[parent].children.push(idx);
            }
            elements.push(e);
            if empty {
                done = open.is_empty();
            } else {
                if open.len() >= MAX_DEPTH {
                    return None;
                }
                open.push((idx, raw_name));
            }
        }
    }
    if !done || !open.is_empty() {
        return None;
    }
    for e in &mut elements {
        let t = e.text.trim();
        if t.len() != e.text.len() {
            e.text = t.to_string();
        }
    }
    Some(Doc { elements })
}

/// `s` escaped for element text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_resolved_whatever_the_prefixes() {
        let d = parse(
            br#"<?xml version="1.0"?><!-- c --><e:Env xmlns:e="urn:a" xmlns="urn:d"><Body x='1'>
            <e:T xmlns:q="urn:q">q:One e:Two  Three</e:T><![CDATA[<raw>]]></Body></e:Env>"#,
        )
        .unwrap();
        let root = d.root();
        assert_eq!((root.ns.as_str(), root.local.as_str()), ("urn:a", "Env"));
        let body = d.child(root, "urn:d", "Body").unwrap();
        assert_eq!(body.text, "<raw>");
        let t = d.child(body, "urn:a", "T").unwrap();
        let q: Vec<_> = t.qnames();
        assert_eq!(q[0], ("urn:q".into(), "One".into()));
        assert_eq!(q[1], ("urn:a".into(), "Two".into()));
        assert_eq!(q[2], ("urn:d".into(), "Three".into()));
    }

    #[test]
    fn broken_or_hostile_documents_are_refused() {
        for bad in [
            &b"<a>"[..],
            b"<a></b>",
            b"<a/><b/>",
            b"text<a/>",
            b"<x:a/>",
            b"<a b=1/>",
            b"<a>&bogus;</a>",
            b"<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
            b"<a><!-- open",
            b"\xff\xfe<a/>",
            b"",
        ] {
            assert!(parse(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).is_none());
        let wide = format!("<a>{}</a>", "<b/>".repeat(MAX_ELEMENTS));
        assert!(parse(wide.as_bytes()).is_none());
        assert!(parse(b"<a>&#x41;&lt;&#66;</a>").is_some_and(|d| d.root().text == "A<B"));
    }
}
