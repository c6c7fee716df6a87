use super::*;

fn names(language: SourceLanguage, source: &str) -> Vec<String> {
    extract_symbols(language, source)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|s| {
            format!(
                "{} {} {}-{} d{}",
                s.kind, s.name, s.start_line, s.end_line, s.depth
            )
        })
        .collect()
}

#[test]
fn rust_symbols() {
    let source = "const MAX: u32 = 3;\nstruct Point { x: i32 }\nenum E { A }\ntrait Shape {\n    fn area(&self) -> f64;\n}\nimpl Shape for Point {\n    fn area(&self) -> f64 {\n        0.0\n    }\n}\nmod inner {\n    pub fn helper() {}\n}\nfn main() {}\n";
    let got = names(SourceLanguage::Rust, source);
    assert_eq!(
        got,
        vec![
            "const MAX 1-1 d0",
            "struct Point 2-2 d0",
            "enum E 3-3 d0",
            "trait Shape 4-6 d0",
            "method area 5-5 d1",
            "impl Shape for Point 7-11 d0",
            "method area 8-10 d1",
            "module inner 12-14 d0",
            "function helper 13-13 d1",
            "function main 15-15 d0",
        ]
    );
}

#[test]
fn python_symbols() {
    let source = "LIMIT = 10\nx = 1\n\nclass Stack:\n    def push(self, v):\n        pass\n\n@decorator\ndef top():\n    return 1\n";
    assert_eq!(
        names(SourceLanguage::Python, source),
        vec![
            "const LIMIT 1-1 d0",
            "class Stack 4-6 d0",
            "method push 5-6 d1",
            "function top 9-10 d0"
        ]
    );
}

#[test]
fn javascript_symbols() {
    let source = "export function a() {}\nconst B = 2;\nconst c = () => 1;\nclass D {\n  m() {}\n}\nlet e = 1;\n";
    assert_eq!(
        names(SourceLanguage::JavaScript, source),
        vec![
            "function a 1-1 d0",
            "const B 2-2 d0",
            "function c 3-3 d0",
            "class D 4-6 d0",
            "method m 5-5 d1"
        ]
    );
}

#[test]
fn typescript_symbols() {
    let source = "interface Shape {\n  area(): number;\n}\ntype Id = string;\nenum Color { Red }\nexport class Sq implements Shape {\n  area(): number { return 1; }\n}\nnamespace N {\n  export function f() {}\n}\n";
    assert_eq!(
        names(SourceLanguage::TypeScript, source),
        vec![
            "interface Shape 1-3 d0",
            "method area 2-2 d1",
            "type Id 4-4 d0",
            "enum Color 5-5 d0",
            "class Sq 6-8 d0",
            "method area 7-7 d1",
            "namespace N 9-11 d0",
            "function f 10-10 d1",
        ]
    );
}

#[test]
fn tsx_symbols() {
    let source = "export function App(): JSX.Element {\n  return <div>hi</div>;\n}\nconst Button = () => <button/>;\n";
    assert_eq!(
        names(SourceLanguage::Tsx, source),
        vec!["function App 1-3 d0", "function Button 4-4 d0"]
    );
}

#[test]
fn go_symbols() {
    let source = "package main\n\nconst Max = 3\n\ntype Point struct {\n\tX int\n}\n\ntype Shape interface {\n\tArea() float64\n}\n\nfunc (p *Point) Area() float64 {\n\treturn 0\n}\n\nfunc main() {}\n";
    assert_eq!(
        names(SourceLanguage::Go, source),
        vec![
            "const Max 3-3 d0",
            "struct Point 5-7 d0",
            "interface Shape 9-11 d0",
            "method (p *Point) Area 13-15 d0",
            "function main 17-17 d0",
        ]
    );
}

#[test]
fn languages_come_from_extensions() {
    use std::path::Path;
    assert_eq!(
        SourceLanguage::from_path(Path::new("a/b.tsx")),
        Some(SourceLanguage::Tsx)
    );
    assert_eq!(
        SourceLanguage::from_path(Path::new("x.mjs")),
        Some(SourceLanguage::JavaScript)
    );
    assert_eq!(SourceLanguage::from_path(Path::new("README.md")), None);
}
