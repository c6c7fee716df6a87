use super::super::*;
use super::sample;

/// `src/lib.rs` has two hunks of 6 and 5 rows, `README.md` one of 3 rows.
fn state_with_viewport(model: &DiffModel, rows: usize) -> DiffViewState {
    let mut state = DiffViewState::default();
    state.fit(model, rows);
    state
}

#[test]
fn hunk_navigation_crosses_files_and_clamps_at_both_ends() {
    let model = sample();
    let mut state = state_with_viewport(&model, 3);
    let mut visited = vec![(state.selected_file(), state.selected_hunk(), state.scroll())];
    for _ in 0..4 {
        state.next_hunk(&model);
        visited.push((state.selected_file(), state.selected_hunk(), state.scroll()));
    }
    assert_eq!(
        visited,
        [(0, 0, 0), (0, 1, 6), (1, 0, 0), (1, 0, 0), (1, 0, 0)]
    );
    state.prev_hunk(&model);
    assert_eq!((state.selected_file(), state.selected_hunk()), (0, 1));
    state.prev_hunk(&model);
    state.prev_hunk(&model);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (0, 0, 0)
    );
}

#[test]
fn file_navigation_clamps_and_resets_the_position() {
    let model = sample();
    let mut state = state_with_viewport(&model, 3);
    state.prev_file(&model);
    assert_eq!(state.selected_file(), 0);
    state.scroll_by(&model, 4);
    state.next_file(&model);
    state.next_file(&model);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (1, 0, 0)
    );
    assert_eq!(state.selected_path(&model), Some("README.md"));
}

#[test]
fn scrolling_clamps_to_the_last_page_and_follows_hunks_out_of_sight() {
    let model = sample();
    let mut state = state_with_viewport(&model, 3);
    state.scroll_by(&model, 2);
    assert_eq!(
        (state.scroll(), state.selected_hunk()),
        (2, 0),
        "hunk 0 still visible"
    );
    state.scroll_by(&model, 4);
    assert_eq!((state.scroll(), state.selected_hunk()), (6, 1));
    state.scroll_by(&model, 100);
    assert_eq!(state.scroll(), 8, "11 rows, 3 visible");
    state.scroll_by(&model, -100);
    assert_eq!((state.scroll(), state.selected_hunk()), (0, 0));
    state.page(&model, 1);
    assert_eq!(state.scroll(), 2, "a page is the viewport less one row");
    state.bottom(&model);
    assert_eq!((state.scroll(), state.selected_hunk()), (8, 1));
    state.top(&model);
    assert_eq!((state.scroll(), state.selected_hunk()), (0, 0));
}

#[test]
fn follow_model_keeps_the_selected_path_and_nearest_hunk() {
    let old = sample();
    let mut state = state_with_viewport(&old, 3);
    state.next_hunk(&old);
    state.scroll_by(&old, 1);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (0, 1, 7)
    );

    let mut new = old.clone();
    let mut extra = new.files[1].clone();
    extra.path = "AAA.md".to_string();
    new.files.insert(0, extra);
    new.files[1].hunks[1].new_start += 3;
    state.follow_model(&old, &new);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (1, 1, 7)
    );
    assert_eq!(state.selected_path(&new), Some("src/lib.rs"));

    let mut gone = new.clone();
    gone.files.remove(1);
    gone.files.truncate(1);
    state.follow_model(&new, &gone);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (0, 0, 0)
    );

    state.follow_model(&gone, &DiffModel::default());
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (0, 0, 0)
    );
}

#[test]
fn every_method_tolerates_an_empty_or_shrunken_model() {
    let empty = DiffModel::default();
    let mut state = DiffViewState::default();
    state.next_file(&empty);
    state.prev_file(&empty);
    state.next_hunk(&empty);
    state.prev_hunk(&empty);
    state.scroll_by(&empty, 5);
    state.page(&empty, -3);
    state.bottom(&empty);
    state.top(&empty);
    assert_eq!(
        (state.selected_file(), state.selected_hunk(), state.scroll()),
        (0, 0, 0)
    );

    let model = sample();
    let mut state = state_with_viewport(&model, 1);
    state.next_file(&model);
    let mut smaller = model.clone();
    smaller.files.truncate(1);
    state.next_hunk(&smaller);
    assert_eq!((state.selected_file(), state.selected_hunk()), (0, 1));
}
