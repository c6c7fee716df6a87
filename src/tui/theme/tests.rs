use std::path::Path;

use ratatui::style::{Color, Modifier, Style};

use super::*;

fn write_theme(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(format!("{name}.toml")), text).expect("write theme");
}

#[test]
fn every_shipped_theme_loads_and_gives_each_meaning_a_style() {
    for name in ["default", "light", "high-contrast"] {
        let theme = Theme::load_coloured(name, None).expect("shipped theme loads");
        assert_eq!(theme.name(), name);
        for meaning in Meaning::ALL {
            assert_ne!(
                theme.get(meaning),
                Style::default(),
                "{name} leaves {} unstyled",
                meaning.key()
            );
        }
    }
}

#[test]
fn default_theme_defines_every_key_itself() {
    let file = parse_theme_file("default", BUILT_IN_THEMES[0].1).expect("parses");
    assert!(file.inherits.is_none());
    for meaning in Meaning::ALL {
        assert!(
            file.styles.contains_key(meaning.key()),
            "missing {}",
            meaning.key()
        );
    }
}

#[test]
fn shipped_themes_differ() {
    let default = Theme::load_coloured("default", None).expect("default");
    let light = Theme::load_coloured("light", None).expect("light");
    let contrast = Theme::load_coloured("high-contrast", None).expect("high-contrast");
    assert_eq!(default.get(Meaning::Title).fg, Some(Color::Cyan));
    assert_eq!(light.get(Meaning::Title).fg, Some(Color::Blue));
    assert_eq!(contrast.get(Meaning::DiffAdded).fg, Some(Color::LightGreen));
}

#[test]
fn child_palette_recolours_inherited_styles_and_keys_override() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(
        dir.path(),
        "mine",
        "inherits = \"default\"\n\"tool.ok\" = { fg = \"white\", modifiers = [\"italic\"] }\n[palette]\ngood = \"light-blue\"\n",
    );
    let theme = Theme::load_coloured("mine", Some(dir.path())).expect("loads");
    assert_eq!(theme.get(Meaning::CheckPass).fg, Some(Color::LightBlue));
    let tool_ok = theme.get(Meaning::ToolOk);
    assert_eq!(tool_ok.fg, Some(Color::White));
    assert!(tool_ok.add_modifier.contains(Modifier::ITALIC));
    assert_eq!(theme.get(Meaning::Title).fg, Some(Color::Cyan));
}

#[test]
fn nested_tables_and_dotted_fallback() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(
        dir.path(),
        "nested",
        "[ui]\nborder = \"magenta\"\ntext = { bg = \"blue\" }\n",
    );
    let theme = Theme::load_coloured("nested", Some(dir.path())).expect("loads");
    assert_eq!(theme.get(Meaning::Border).fg, Some(Color::Magenta));
    assert_eq!(theme.get(Meaning::BorderFocused).fg, Some(Color::Magenta));
    assert_eq!(theme.get(Meaning::Text).bg, Some(Color::Blue));
    assert_eq!(theme.get(Meaning::ToolOk), Style::default());
}

#[test]
fn user_theme_may_override_the_built_in_of_the_same_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(
        dir.path(),
        "default",
        "inherits = \"default\"\n\"ui.title\" = \"red\"\n",
    );
    let theme = Theme::load_coloured("default", Some(dir.path())).expect("loads");
    assert_eq!(theme.get(Meaning::Title).fg, Some(Color::Red));
    assert_eq!(theme.get(Meaning::DiffAdded).fg, Some(Color::Green));
}

#[test]
fn inheritance_cycle_is_an_error_naming_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(dir.path(), "a", "inherits = \"b\"\n");
    write_theme(dir.path(), "b", "inherits = \"a\"\n");
    let error = Theme::load_coloured("a", Some(dir.path())).expect_err("cycle");
    assert!(
        matches!(error, ThemeError::InheritanceCycle { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("a -> b -> a"), "{error}");
}

#[test]
fn rgb_and_indexed_colours_are_rejected_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(dir.path(), "rgb", "\"diff.hunk\" = { fg = \"#ff0000\" }\n");
    write_theme(dir.path(), "indexed", "[palette]\nx = \"202\"\n");
    let error = Theme::load_coloured("rgb", Some(dir.path())).expect_err("rgb");
    let message = error.to_string();
    assert!(
        message.contains("diff.hunk") && message.contains("#ff0000"),
        "{message}"
    );
    let error = Theme::load_coloured("indexed", Some(dir.path())).expect_err("indexed");
    assert!(error.to_string().contains("palette.x"), "{error}");
}

#[test]
fn unknown_theme_lists_available_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(dir.path(), "solar", "\"ui.text\" = \"yellow\"\n");
    let error = Theme::load_coloured("nope", Some(dir.path())).expect_err("unknown");
    let message = error.to_string();
    for name in ["default", "high-contrast", "light", "solar"] {
        assert!(message.contains(name), "{message}");
    }
}

#[test]
fn unknown_keys_and_modifiers_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_theme(dir.path(), "typo", "\"ui.txt\" = \"red\"\n");
    write_theme(
        dir.path(),
        "blinky",
        "\"ui.text\" = { modifiers = [\"sparkly\"] }\n",
    );
    let error = Theme::load_coloured("typo", Some(dir.path())).expect_err("typo");
    assert!(error.to_string().contains("ui.txt"), "{error}");
    let error = Theme::load_coloured("blinky", Some(dir.path())).expect_err("modifier");
    assert!(error.to_string().contains("sparkly"), "{error}");
}

#[test]
fn no_color_removes_colours_and_keeps_modifiers() {
    assert!(colour_disabled(Some("1")));
    assert!(!colour_disabled(Some("")));
    assert!(!colour_disabled(None));
    let theme = Theme::load_coloured("default", None)
        .expect("default")
        .without_colours();
    for meaning in Meaning::ALL {
        let style = theme.get(meaning);
        assert_eq!((style.fg, style.bg), (None, None), "{}", meaning.key());
    }
    assert!(
        theme
            .get(Meaning::Title)
            .add_modifier
            .contains(Modifier::BOLD)
    );
}
