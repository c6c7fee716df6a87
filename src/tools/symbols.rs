//! `tree_sitter_symbols`: the definitions of a source file, found with the
//! tree-sitter grammars of Rust, Python, JavaScript, TypeScript, TSX and Go.

use std::fmt::Write as _;
use std::path::Path;

use tree_sitter::{Node, Parser};

use super::paths::{self, display};
use super::read_file::read_text_bytes;
use super::{SymbolsArgs, ToolError, ToolOutput};
use crate::workspace::WorkspaceRoot;

/// Nesting deeper than this is not descended (a guard against the stack).
const MAX_NESTING: usize = 256;

/// The languages whose symbols can be listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceLanguage {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
}

impl SourceLanguage {
    pub(crate) fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "rs" => Self::Rust,
            "py" | "pyi" => Self::Python,
            "js" | "mjs" | "cjs" | "jsx" => Self::JavaScript,
            "ts" | "mts" | "cts" => Self::TypeScript,
            "tsx" => Self::Tsx,
            "go" => Self::Go,
            _ => return None,
        })
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Self::Rust => tree_sitter_rust::LANGUAGE.into(),
            Self::Python => tree_sitter_python::LANGUAGE.into(),
            Self::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Self::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Self::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Self::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }
}

/// One definition: its kind ("function", "struct", …), name, 1-based line
/// range and nesting depth (0 at top level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub kind: &'static str,
    pub name: String,
    pub start_line: usize,
    pub end_line: usize,
    pub depth: usize,
}

pub(crate) fn symbols_tool(
    args: &SymbolsArgs,
    root: &WorkspaceRoot,
) -> Result<ToolOutput, ToolError> {
    let rel = paths::relative(&args.path)?;
    let shown = display(&rel);
    let language = SourceLanguage::from_path(&rel).ok_or_else(|| ToolError::BadPath {
        path: shown.clone(),
        problem: "has no supported extension; tree_sitter_symbols reads .rs, .py, .js/.mjs/.cjs/.jsx, .ts/.mts/.cts, .tsx and .go files — use read_file or ripgrep for others".into(),
    })?;
    let bytes = read_text_bytes(root, &rel)?;
    let source = String::from_utf8_lossy(&bytes);
    let symbols = extract_symbols(language, &source).map_err(ToolError::refused)?;
    let mut full = format!("{shown} ({language:?}): {} symbols\n", symbols.len());
    for symbol in &symbols {
        let _ = writeln!(
            full,
            "{}{} {}  L{}-{}",
            "  ".repeat(symbol.depth),
            symbol.kind,
            symbol.name,
            symbol.start_line,
            symbol.end_line
        );
    }
    Ok(ToolOutput::success(
        full,
        format!("{} symbols", symbols.len()),
    ))
}

/// The definitions in `source`, in file order.
pub fn extract_symbols(language: SourceLanguage, source: &str) -> Result<Vec<Symbol>, String> {
    let mut parser = Parser::new();
    parser
        .set_language(&language.grammar())
        .map_err(|e| format!("the {language:?} grammar could not be loaded: {e}"))?;
    let tree = parser
        .parse(source, None)
        .ok_or_else(|| "the parser gave up on this file; use read_file instead".to_string())?;
    let mut out = Vec::new();
    let mut collector = Collector {
        language,
        source: source.as_bytes(),
        out: &mut out,
    };
    collector.children(tree.root_node(), 0, false, 0);
    Ok(out)
}

struct Collector<'a> {
    language: SourceLanguage,
    source: &'a [u8],
    out: &'a mut Vec<Symbol>,
}

impl Collector<'_> {
    fn children(&mut self, node: Node<'_>, depth: usize, in_type: bool, nesting: usize) {
        if nesting > MAX_NESTING {
            return;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for child in children {
            self.node(child, depth, in_type, nesting + 1);
        }
    }

    fn node(&mut self, node: Node<'_>, depth: usize, in_type: bool, nesting: usize) {
        match self.classify(node, in_type) {
            Classified::Symbol {
                kind,
                name,
                container,
            } => {
                self.push(kind, name, node, depth);
                match container {
                    Container::Leaf => {}
                    Container::Type => self.children(node, depth + 1, true, nesting),
                    Container::Scope => self.children(node, depth + 1, false, nesting),
                }
            }
            Classified::Several(items) => {
                for (kind, name, at) in items {
                    self.push(kind, name, at, depth);
                }
            }
            Classified::Descend => self.children(node, depth, in_type, nesting),
            Classified::Skip => {}
        }
    }

    fn push(&mut self, kind: &'static str, name: String, node: Node<'_>, depth: usize) {
        self.out.push(Symbol {
            kind,
            name,
            start_line: node.start_position().row + 1,
            end_line: node.end_position().row + 1,
            depth,
        });
    }

    fn text(&self, node: Option<Node<'_>>) -> String {
        node.and_then(|n| n.utf8_text(self.source).ok())
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| "?".into())
    }

    fn name(&self, node: Node<'_>) -> String {
        self.text(node.child_by_field_name("name"))
    }

    fn classify<'t>(&self, node: Node<'t>, in_type: bool) -> Classified<'t> {
        let function = if in_type { "method" } else { "function" };
        let symbol = |kind: &'static str, container: Container| Classified::Symbol {
            kind,
            name: self.name(node),
            container,
        };
        match (self.language, node.kind()) {
            (SourceLanguage::Rust, kind) => match kind {
                "function_item" => symbol(function, Container::Leaf),
                "function_signature_item" => symbol("method", Container::Leaf),
                "struct_item" => symbol("struct", Container::Leaf),
                "enum_item" => symbol("enum", Container::Leaf),
                "union_item" => symbol("union", Container::Leaf),
                "type_item" => symbol("type", Container::Leaf),
                "const_item" => symbol("const", Container::Leaf),
                "static_item" => symbol("static", Container::Leaf),
                "macro_definition" => symbol("macro", Container::Leaf),
                "trait_item" => symbol("trait", Container::Type),
                "mod_item" => symbol("module", Container::Scope),
                "impl_item" => {
                    let ty = self.text(node.child_by_field_name("type"));
                    let name = match node.child_by_field_name("trait") {
                        Some(t) => format!("{} for {ty}", self.text(Some(t))),
                        None => ty,
                    };
                    Classified::Symbol {
                        kind: "impl",
                        name,
                        container: Container::Type,
                    }
                }
                "declaration_list" | "source_file" | "attribute_item" => Classified::Descend,
                _ => Classified::Skip,
            },
            (SourceLanguage::Python, kind) => match kind {
                "function_definition" => symbol(function, Container::Leaf),
                "class_definition" => symbol("class", Container::Type),
                "decorated_definition" | "block" => Classified::Descend,
                "expression_statement" if !in_type => self.python_constant(node),
                _ => Classified::Skip,
            },
            (SourceLanguage::Go, kind) => match kind {
                "function_declaration" => symbol("function", Container::Leaf),
                "method_declaration" => {
                    let receiver = self.text(node.child_by_field_name("receiver"));
                    Classified::Symbol {
                        kind: "method",
                        name: format!("{receiver} {}", self.name(node)),
                        container: Container::Leaf,
                    }
                }
                "type_declaration" | "const_declaration" => Classified::Descend,
                "type_spec" | "type_alias" => {
                    let kind = match node.child_by_field_name("type").map(|t| t.kind()) {
                        Some("struct_type") => "struct",
                        Some("interface_type") => "interface",
                        _ => "type",
                    };
                    symbol(kind, Container::Leaf)
                }
                "const_spec" => symbol("const", Container::Leaf),
                _ => Classified::Skip,
            },
            (_, kind) => match kind {
                "function_declaration" | "generator_function_declaration" => {
                    symbol("function", Container::Leaf)
                }
                "class_declaration" | "abstract_class_declaration" => {
                    symbol("class", Container::Type)
                }
                "method_definition" | "method_signature" | "abstract_method_signature" => {
                    symbol("method", Container::Leaf)
                }
                "interface_declaration" => symbol("interface", Container::Type),
                "type_alias_declaration" => symbol("type", Container::Leaf),
                "enum_declaration" => symbol("enum", Container::Leaf),
                "internal_module" | "module" => symbol("namespace", Container::Scope),
                "lexical_declaration" | "variable_declaration" => self.js_declarations(node),
                "export_statement"
                | "class_body"
                | "interface_body"
                | "object_type"
                | "statement_block"
                | "program"
                | "ambient_declaration"
                | "expression_statement" => Classified::Descend,
                _ => Classified::Skip,
            },
        }
    }

    /// `NAME = …` at module level with an upper-case name.
    fn python_constant<'t>(&self, node: Node<'t>) -> Classified<'t> {
        let Some(assignment) = node.named_child(0).filter(|n| n.kind() == "assignment") else {
            return Classified::Skip;
        };
        let name = self.text(assignment.child_by_field_name("left"));
        let is_constant = name.chars().any(|c| c.is_ascii_uppercase())
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if is_constant {
            Classified::Several(vec![("const", name, node)])
        } else {
            Classified::Skip
        }
    }

    /// `const NAME = …` (a constant, or a function when it holds one) and
    /// `let`/`var` bindings that hold functions.
    fn js_declarations<'t>(&self, node: Node<'t>) -> Classified<'t> {
        let is_const = node.child(0).is_some_and(|first| first.kind() == "const");
        let mut cursor = node.walk();
        let items = node
            .named_children(&mut cursor)
            .filter(|n| n.kind() == "variable_declarator")
            .filter_map(|declarator| {
                let value_kind = declarator.child_by_field_name("value").map(|v| v.kind());
                let kind = match value_kind {
                    Some("arrow_function" | "function_expression" | "function") => "function",
                    Some("class") => "class",
                    _ if is_const => "const",
                    _ => return None,
                };
                Some((kind, self.name(declarator), declarator))
            })
            .collect();
        Classified::Several(items)
    }
}

/// Whether and how a symbol's body is searched for nested symbols.
#[derive(Clone, Copy)]
enum Container {
    Leaf,
    /// A type (class, impl, trait, interface): its functions are methods.
    Type,
    /// A module or namespace.
    Scope,
}

enum Classified<'t> {
    Symbol {
        kind: &'static str,
        name: String,
        container: Container,
    },
    Several(Vec<(&'static str, String, Node<'t>)>),
    Descend,
    Skip,
}

#[cfg(test)]
#[path = "symbols_tests.rs"]
mod tests;
