//! A parser for the DOT language, enough of it for `terraform graph` and hand-written graphs.
//!
//! It reads a whole graph (`strict`, `graph`/`digraph`, nested and anonymous subgraphs, node and
//! edge statements with attribute lists, edge chains, ports, quoted/HTML/numeral ids, `+`
//! concatenation, comments) and keeps only what the converter needs: every node with its
//! attributes, and every edge as a directed pair. Default attribute statements
//! (`node [...]`, `edge [...]`, `graph [...]`) are parsed and ignored: terraform never writes them
//! and node labels are all the converter reads. Edges are directed from their left to their right
//! operand whatever the operator; that is how terraform spells "depends on".
//!
//! Untrusted input cannot make it panic or recurse without bound: nesting is capped.

use std::collections::{BTreeMap, HashMap};

/// How deep subgraphs may nest. Terraform writes one level; the cap only stops hostile input
/// from exhausting the stack.
const MAX_NESTING: usize = 64;

/// A malformed DOT document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct DotError {
    /// Byte offset in the input where the problem was noticed.
    pub offset: usize,
    /// What was wrong.
    pub message: String,
}

/// A node: its id (unquoted) and its attributes (values unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DotNode {
    pub id: String,
    pub attrs: BTreeMap<String, String>,
}

/// Nodes in the order they first appear, and edges as indices into them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DotGraph {
    pub nodes: Vec<DotNode>,
    pub edges: Vec<(usize, usize)>,
}

impl DotGraph {
    fn node(&mut self, index: &mut HashMap<String, usize>, id: &str) -> usize {
        if let Some(&existing) = index.get(id) {
            return existing;
        }
        self.nodes.push(DotNode {
            id: id.to_owned(),
            attrs: BTreeMap::new(),
        });
        let at = self.nodes.len() - 1;
        index.insert(id.to_owned(), at);
        at
    }
}

/// Parses one DOT graph.
pub(crate) fn parse(input: &str) -> Result<DotGraph, DotError> {
    let mut parser = Parser {
        lexer: Lexer { src: input, pos: 0 },
        peeked: None,
        graph: DotGraph::default(),
        index: HashMap::new(),
    };
    parser.graph()?;
    Ok(parser.graph)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An id; `quoted` ids are never keywords.
    Id {
        text: String,
        quoted: bool,
    },
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Equals,
    Semicolon,
    Comma,
    Colon,
    /// `->` or `--`.
    EdgeOp,
    Eof,
}

impl Token {
    fn is_keyword(&self, keyword: &str) -> bool {
        matches!(self, Token::Id { text, quoted: false } if text.eq_ignore_ascii_case(keyword))
    }
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    fn error(&self, offset: usize, message: impl Into<String>) -> DotError {
        DotError {
            offset,
            message: message.into(),
        }
    }

    fn peek_byte(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn at_line_start(&self) -> bool {
        self.src.as_bytes()[..self.pos]
            .iter()
            .rev()
            .take_while(|&&b| b != b'\n')
            .all(|b| b.is_ascii_whitespace())
    }

    /// Skips whitespace and the three comment forms DOT allows.
    fn skip_trivia(&mut self) -> Result<(), DotError> {
        loop {
            match (self.peek_byte(0), self.peek_byte(1)) {
                (Some(b), _) if b.is_ascii_whitespace() => self.pos += 1,
                (Some(b'/'), Some(b'/')) => self.skip_line(),
                (Some(b'#'), _) if self.at_line_start() => self.skip_line(),
                (Some(b'/'), Some(b'*')) => {
                    let start = self.pos;
                    match self.src[self.pos + 2..].find("*/") {
                        Some(end) => self.pos += 2 + end + 2,
                        None => return Err(self.error(start, "unterminated comment")),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn skip_line(&mut self) {
        match self.src[self.pos..].find('\n') {
            Some(end) => self.pos += end + 1,
            None => self.pos = self.src.len(),
        }
    }

    /// The next token and the offset it starts at.
    fn next(&mut self) -> Result<(Token, usize), DotError> {
        self.skip_trivia()?;
        let start = self.pos;
        let Some(byte) = self.peek_byte(0) else {
            return Ok((Token::Eof, start));
        };
        let single = match byte {
            b'{' => Some(Token::LBrace),
            b'}' => Some(Token::RBrace),
            b'[' => Some(Token::LBracket),
            b']' => Some(Token::RBracket),
            b'=' => Some(Token::Equals),
            b';' => Some(Token::Semicolon),
            b',' => Some(Token::Comma),
            b':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(token) = single {
            self.pos += 1;
            return Ok((token, start));
        }
        if byte == b'-' && matches!(self.peek_byte(1), Some(b'>' | b'-')) {
            self.pos += 2;
            return Ok((Token::EdgeOp, start));
        }
        let token = match byte {
            b'"' => self.quoted()?,
            b'<' => self.html()?,
            b'-' | b'.' | b'0'..=b'9' => self.numeral()?,
            b if is_id_byte(b) => {
                let len = self.src.as_bytes()[self.pos..]
                    .iter()
                    .take_while(|&&b| is_id_byte(b) || b.is_ascii_digit())
                    .count();
                let text = self.src[self.pos..self.pos + len].to_owned();
                self.pos += len;
                Token::Id {
                    text,
                    quoted: false,
                }
            }
            _ => return Err(self.error(start, format!("unexpected character {:?}", byte as char))),
        };
        Ok((token, start))
    }

    /// A double-quoted string, possibly `+`-concatenated with more of them.
    fn quoted(&mut self) -> Result<Token, DotError> {
        let mut text = String::new();
        loop {
            let start = self.pos;
            self.pos += 1;
            let mut chunk_start = self.pos;
            loop {
                match self.peek_byte(0) {
                    None => return Err(self.error(start, "unterminated string")),
                    Some(b'"') => break,
                    Some(b'\\') => match self.peek_byte(1) {
                        Some(b'"') => {
                            text.push_str(&self.src[chunk_start..self.pos]);
                            text.push('"');
                            self.pos += 2;
                            chunk_start = self.pos;
                        }
                        Some(b'\n') => {
                            text.push_str(&self.src[chunk_start..self.pos]);
                            self.pos += 2;
                            chunk_start = self.pos;
                        }
                        // Other escapes (\n, \l ...) mean something to renderers, not to us. As in
                        // Graphviz, `\\` is not an escape: `"a\\"` leaves the string open.
                        _ => self.pos += 1,
                    },
                    Some(_) => self.pos += 1,
                }
            }
            text.push_str(&self.src[chunk_start..self.pos]);
            self.pos += 1;

            let after = self.pos;
            self.skip_trivia()?;
            if self.peek_byte(0) == Some(b'+') {
                self.pos += 1;
                self.skip_trivia()?;
                if self.peek_byte(0) == Some(b'"') {
                    continue;
                }
                return Err(self.error(self.pos, "expected a string after '+'"));
            }
            self.pos = after;
            return Ok(Token::Id { text, quoted: true });
        }
    }

    /// An HTML-like label `<...>`, kept verbatim without the outer brackets.
    fn html(&mut self) -> Result<Token, DotError> {
        let start = self.pos;
        let mut depth = 0usize;
        for (offset, byte) in self.src.as_bytes()[start..].iter().enumerate() {
            match byte {
                b'<' => depth += 1,
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        let text = self.src[start + 1..start + offset].to_owned();
                        self.pos = start + offset + 1;
                        return Ok(Token::Id { text, quoted: true });
                    }
                }
                _ => {}
            }
        }
        Err(self.error(start, "unterminated HTML string"))
    }

    /// `-?(.[0-9]+ | [0-9]+(.[0-9]*)?)`
    fn numeral(&mut self) -> Result<Token, DotError> {
        let start = self.pos;
        if self.peek_byte(0) == Some(b'-') {
            self.pos += 1;
        }
        let digits = |lexer: &mut Self| {
            let from = lexer.pos;
            while lexer.peek_byte(0).is_some_and(|b| b.is_ascii_digit()) {
                lexer.pos += 1;
            }
            lexer.pos - from
        };
        let whole = digits(self);
        let mut fraction = 0;
        if self.peek_byte(0) == Some(b'.') {
            self.pos += 1;
            fraction = digits(self);
        }
        if whole == 0 && fraction == 0 {
            return Err(self.error(start, "malformed number"));
        }
        Ok(Token::Id {
            text: self.src[start..self.pos].to_owned(),
            quoted: false,
        })
    }
}

/// Letters, `_`, and any non-ASCII byte (DOT allows any non-ASCII character in ids; slicing only
/// ever happens at ASCII bytes, so multi-byte characters stay whole).
fn is_id_byte(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_' || byte >= 0x80
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<(Token, usize)>,
    graph: DotGraph,
    index: HashMap<String, usize>,
}

impl Parser<'_> {
    fn peek_entry(&mut self) -> Result<&(Token, usize), DotError> {
        let entry = match self.peeked.take() {
            Some(entry) => entry,
            None => self.lexer.next()?,
        };
        Ok(self.peeked.insert(entry))
    }

    fn peek(&mut self) -> Result<&Token, DotError> {
        Ok(&self.peek_entry()?.0)
    }

    fn bump(&mut self) -> Result<(Token, usize), DotError> {
        match self.peeked.take() {
            Some(next) => Ok(next),
            None => self.lexer.next(),
        }
    }

    fn expect(&mut self, wanted: &Token, what: &str) -> Result<(), DotError> {
        let (token, offset) = self.bump()?;
        if &token == wanted {
            Ok(())
        } else {
            Err(self.lexer.error(offset, format!("expected {what}")))
        }
    }

    fn id(&mut self, what: &str) -> Result<String, DotError> {
        match self.bump()? {
            (Token::Id { text, .. }, _) => Ok(text),
            (_, offset) => Err(self.lexer.error(offset, format!("expected {what}"))),
        }
    }

    fn graph(&mut self) -> Result<(), DotError> {
        if self.peek()?.is_keyword("strict") {
            self.bump()?;
        }
        let (token, offset) = self.bump()?;
        if !token.is_keyword("digraph") && !token.is_keyword("graph") {
            return Err(self.lexer.error(offset, "expected 'digraph' or 'graph'"));
        }
        if matches!(self.peek()?, Token::Id { .. }) {
            self.bump()?;
        }
        self.expect(&Token::LBrace, "'{'")?;
        self.statements(0)?;
        self.expect(&Token::RBrace, "'}'")?;
        match self.bump()? {
            (Token::Eof, _) => Ok(()),
            (_, offset) => Err(self.lexer.error(offset, "unexpected text after the graph")),
        }
    }

    /// Statements up to (not including) the closing `}` of the current block.
    fn statements(&mut self, depth: usize) -> Result<Vec<usize>, DotError> {
        let mut members = Vec::new();
        loop {
            match self.peek()? {
                Token::RBrace | Token::Eof => return Ok(members),
                Token::Semicolon => {
                    self.bump()?;
                }
                _ => self.statement(depth, &mut members)?,
            }
        }
    }

    fn statement(&mut self, depth: usize, members: &mut Vec<usize>) -> Result<(), DotError> {
        let token = self.peek()?.clone();
        if ["graph", "node", "edge"]
            .iter()
            .any(|k| token.is_keyword(k))
        {
            self.bump()?;
            self.attributes()?;
            return Ok(());
        }
        let first = self.operand(depth)?;
        if matches!(first, Operand::Node(_)) && *self.peek()? == Token::Equals {
            // `id = id`: a graph attribute.
            self.bump()?;
            self.id("an attribute value")?;
            return Ok(());
        }
        let is_node_statement = matches!(first, Operand::Node(_));
        let mut operands = vec![first];
        while *self.peek()? == Token::EdgeOp {
            self.bump()?;
            operands.push(self.operand(depth)?);
        }
        let attrs = self.attributes()?;
        let resolved: Vec<Vec<usize>> = operands
            .into_iter()
            .map(|operand| match operand {
                Operand::Node(id) => vec![self.graph.node(&mut self.index, &id)],
                Operand::Subgraph(nodes) => nodes,
            })
            .collect();
        if let [single] = resolved.as_slice()
            && is_node_statement
        {
            for &node in single {
                self.graph.nodes[node].attrs.extend(attrs.clone());
            }
        }
        for pair in resolved.windows(2) {
            for &from in &pair[0] {
                for &to in &pair[1] {
                    self.graph.edges.push((from, to));
                }
            }
        }
        members.extend(resolved.into_iter().flatten());
        Ok(())
    }

    fn operand(&mut self, depth: usize) -> Result<Operand, DotError> {
        let token = self.peek()?.clone();
        if token == Token::LBrace || token.is_keyword("subgraph") {
            return self.subgraph(depth).map(Operand::Subgraph);
        }
        let id = self.id("a node id, a subgraph or an attribute")?;
        // A port (`node:port` or `node:port:compass`) names a point on the node; edges still
        // join the nodes.
        for _ in 0..2 {
            if *self.peek()? != Token::Colon {
                break;
            }
            self.bump()?;
            self.id("a port")?;
        }
        Ok(Operand::Node(id))
    }

    fn subgraph(&mut self, depth: usize) -> Result<Vec<usize>, DotError> {
        let offset = self.peek_entry()?.1;
        if depth >= MAX_NESTING {
            return Err(self.lexer.error(offset, "subgraphs nested too deeply"));
        }
        if self.peek()?.is_keyword("subgraph") {
            self.bump()?;
            if matches!(self.peek()?, Token::Id { .. }) {
                self.bump()?;
            }
        }
        self.expect(&Token::LBrace, "'{'")?;
        let members = self.statements(depth + 1)?;
        self.expect(&Token::RBrace, "'}'")?;
        Ok(members)
    }

    /// Zero or more `[a = b, c = d; ...]` lists, merged.
    fn attributes(&mut self) -> Result<BTreeMap<String, String>, DotError> {
        let mut attrs = BTreeMap::new();
        while *self.peek()? == Token::LBracket {
            self.bump()?;
            loop {
                match self.peek()? {
                    Token::RBracket => {
                        self.bump()?;
                        break;
                    }
                    Token::Comma | Token::Semicolon => {
                        self.bump()?;
                    }
                    _ => {
                        let key = self.id("an attribute name")?;
                        self.expect(&Token::Equals, "'='")?;
                        let value = self.id("an attribute value")?;
                        attrs.insert(key, value);
                    }
                }
            }
        }
        Ok(attrs)
    }
}

enum Operand {
    Node(String),
    Subgraph(Vec<usize>),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn label_of<'g>(graph: &'g DotGraph, id: &str) -> Option<&'g str> {
        graph
            .nodes
            .iter()
            .find(|node| node.id == id)
            .and_then(|node| node.attrs.get("label"))
            .map(String::as_str)
    }

    fn edge_ids(graph: &DotGraph) -> Vec<(&str, &str)> {
        graph
            .edges
            .iter()
            .map(|&(a, b)| (graph.nodes[a].id.as_str(), graph.nodes[b].id.as_str()))
            .collect()
    }

    #[test]
    fn reads_terraform_output() -> Result<(), DotError> {
        let graph = parse(
            r#"digraph {
	compound = "true"
	newrank = "true"
	subgraph "root" {
		"[root] coder_agent.main (expand)" [label = "coder_agent.main", shape = "box"]
		"[root] provider[\"registry.terraform.io/coder/coder\"]" [label = "provider[\"registry.terraform.io/coder/coder\"]", shape = "diamond"]
		"[root] null_resource.a (expand)" -> "[root] coder_agent.main (expand)"
		"[root] module.m.var.x (expand)" -> "[root] coder_agent.main (expand)"
	}
}
"#,
        )?;
        assert_eq!(
            label_of(&graph, "[root] coder_agent.main (expand)"),
            Some("coder_agent.main")
        );
        assert_eq!(
            label_of(
                &graph,
                r#"[root] provider["registry.terraform.io/coder/coder"]"#
            ),
            Some(r#"provider["registry.terraform.io/coder/coder"]"#)
        );
        // Nodes only named by edges exist, without attributes.
        assert_eq!(graph.nodes.len(), 4);
        assert_eq!(label_of(&graph, "[root] module.m.var.x (expand)"), None);
        assert_eq!(
            edge_ids(&graph),
            vec![
                (
                    "[root] null_resource.a (expand)",
                    "[root] coder_agent.main (expand)"
                ),
                (
                    "[root] module.m.var.x (expand)",
                    "[root] coder_agent.main (expand)"
                ),
            ]
        );
        Ok(())
    }

    #[test]
    fn reads_the_rest_of_the_language() -> Result<(), DotError> {
        let graph = parse(
            "# preprocessor line\nstrict DiGraph G { // comment\n\
             node [shape=box]; /* block\ncomment */ a:p:n -> b -> {c d} [color=red]\n\
             x [label=<<b>bold</b>>]; y [label=\"con\" + \"cat\", w=1.5, h=-.5]\n\
             subgraph { e } -> f; g -- h; i = j }",
        )?;
        assert_eq!(
            edge_ids(&graph),
            vec![("a", "b"), ("b", "c"), ("b", "d"), ("e", "f"), ("g", "h")]
        );
        assert_eq!(label_of(&graph, "x"), Some("<b>bold</b>"));
        assert_eq!(label_of(&graph, "y"), Some("concat"));
        // Attributes of an edge statement belong to the edge, not its nodes.
        assert_eq!(graph.nodes[0].attrs.get("color"), None);
        Ok(())
    }

    #[test]
    fn later_statements_add_attributes() -> Result<(), DotError> {
        let graph = parse("digraph { a; a [label=first]; a [label=second, shape=box] }")?;
        assert_eq!(graph.nodes.len(), 1);
        assert_eq!(label_of(&graph, "a"), Some("second"));
        Ok(())
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in [
            "",
            "digraph",
            "digraph {",
            "digraph { a -> }",
            "digraph { \"open }",
            "digraph { a [label] }",
            "digraph { /* open }",
            "digraph { a } trailing",
            "tree { }",
            "digraph { a -> b [x=<open] }",
            "digraph { - }",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn caps_nesting() {
        let deep = format!("digraph {{ {} }}", "{".repeat(10_000));
        let err = parse(&deep).err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.message.contains("nested too deeply")),
            "{err:?}"
        );
        let fine = format!("digraph {{ {} a {} }}", "{".repeat(30), "}".repeat(30));
        assert!(parse(&fine).is_ok());
    }

    fn node_id() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_][a-z0-9_]{0,6}",
            "[ -~]{0,12}".prop_map(|s| format!("\"{}\"", s.replace('\\', "").replace('"', "\\\""))),
            "-?[0-9]{1,3}(\\.[0-9]{1,2})?",
        ]
    }

    proptest! {
        #[test]
        fn never_panics_on_random_text(input in "\\PC{0,200}") {
            let _ = parse(&input);
        }

        #[test]
        fn never_panics_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn never_panics_on_dot_like_soup(
            parts in prop::collection::vec(
                prop_oneof![
                    Just("digraph"), Just("subgraph"), Just("strict"), Just("node"), Just("{"),
                    Just("}"), Just("["), Just("]"), Just("="), Just(";"), Just(","), Just(":"),
                    Just("->"), Just("--"), Just("\"q\\\"x\""), Just("<h<i>>"), Just("+"),
                    Just("a"), Just("-1.5"), Just("/*"), Just("*/"), Just("//"), Just("\n#"),
                    Just("\""), Just("<"), Just(">"), Just("\\"),
                ],
                0..60,
            )
        ) {
            let _ = parse(&parts.join(" "));
        }

        #[test]
        fn random_graphs_round_trip(
            ids in prop::collection::vec(node_id(), 1..12),
            edges in prop::collection::vec((0usize..12, 0usize..12), 0..30),
        ) {
            let mut text = String::from("digraph {\n");
            for (i, id) in ids.iter().enumerate() {
                text.push_str(&format!("  {id} [label = \"n{i}\"]\n"));
            }
            let mut expected = Vec::new();
            for (a, b) in edges {
                let (a, b) = (a % ids.len(), b % ids.len());
                text.push_str(&format!("  {} -> {}\n", ids[a], ids[b]));
                expected.push((a, b));
            }
            text.push('}');
            let graph = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            // Equal ids collapse into one node; compare through the labels of the last writer.
            let label = |id: &str| {
                let unquoted = id.strip_prefix('"').and_then(|s| s.strip_suffix('"'))
                    .map(|s| s.replace("\\\"", "\""))
                    .unwrap_or_else(|| id.to_owned());
                label_of(&graph, &unquoted).map(str::to_owned)
            };
            let got: Vec<(String, String)> = graph.edges.iter()
                .map(|&(a, b)| (graph.nodes[a].attrs["label"].clone(), graph.nodes[b].attrs["label"].clone()))
                .collect();
            let want: Vec<(String, String)> = expected.iter()
                .map(|&(a, b)| (label(&ids[a]).unwrap_or_default(), label(&ids[b]).unwrap_or_default()))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
