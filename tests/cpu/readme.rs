//! The README's code that must stay true to the sources.

/// The lines of `examples/cudarc.rs` between its `README snippet` markers, less the function
/// body's indentation.
fn cudarc_snippet() -> String {
    let example = include_str!("../../examples/cudarc.rs");
    let (_, after_begin) = example
        .split_once("    // README snippet: begin\n")
        .expect("examples/cudarc.rs marks the snippet's beginning");
    let (snippet, _) = after_begin
        .split_once("    // README snippet: end\n")
        .expect("examples/cudarc.rs marks the snippet's end");
    snippet
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("    ").unwrap_or(line)))
        .collect()
}

#[test]
fn the_readme_shows_the_cudarc_example_verbatim() {
    let readme = include_str!("../../README.md");
    let snippet = cudarc_snippet();
    assert!(
        snippet.contains("on_cudarc_stream"),
        "the snippet between the markers lost its call:\n{snippet}"
    );
    assert!(
        readme.contains(&snippet),
        "README.md no longer shows the lines between the markers of examples/cudarc.rs:\n{snippet}"
    );
}
