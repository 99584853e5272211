//! A neuron-top for the Neuron DataStore.
//!
//! [`App`] holds the latest [`MonitorDocument`](nds_document::MonitorDocument) and the user's
//! place in it (tab, tree selection, expansions); [`view::View`] condenses one tab of a
//! report (the "all" aggregate, or one process) into what is shown; [`ui::draw`] lays it out:
//! NeuronCore utilization, executions and errors, memory, the loaded-models tree, and the tab
//! bar. Keys: `1`–`9` pick a tab, `a`/`d` move left/right, arrows move in and fold the tree,
//! `x` folds or unfolds everything, `f` switches utilization and TFLOP/s, `q` quits.
//! [`render_text`] draws one frame into a plain-text screen (for `--once` and tests).

#![warn(missing_docs)]

// Floor 0: what one tab shows.
pub mod view;
// Floor 1: the state and its keys.
pub mod app;
// Floor 2: the screen.
pub mod ui;
// Floor 3: the nds-top tool's command line.
#[cfg(feature = "cli")]
pub mod cli;

pub use app::App;

use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Draws `app` into a `width` × `height` screen and returns it as text, one line per row.
#[must_use]
pub fn render_text(app: &App, width: u16, height: u16) -> String {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height)) else {
        return String::new();
    };
    if terminal.draw(|frame| ui::draw(frame, app)).is_err() {
        return String::new();
    }
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        let mut line = String::new();
        for x in 0..buffer.area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}
