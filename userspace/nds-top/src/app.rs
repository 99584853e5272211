//! The interactive state and its key bindings.

use std::collections::BTreeSet;

use nds_document::MonitorDocument;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::view::{self, Tab, View};

/// What the user is looking at.
#[derive(Clone, Debug, Default)]
pub struct App {
    /// The latest report.
    pub document: MonitorDocument,
    /// Selected tab (0: all).
    pub tab: usize,
    /// Selected line of the models tree.
    pub selected: usize,
    /// Keys of the expanded models.
    pub expanded: BTreeSet<String>,
    /// Show TFLOP/s instead of utilization.
    pub show_flops: bool,
    /// The user asked to quit.
    pub quit: bool,
}

/// A line of the models tree as displayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeLine {
    /// The model it belongs to.
    pub key: String,
    /// Whether it is the model's own line (not a subgraph).
    pub is_model: bool,
    /// Text.
    pub text: String,
}

impl App {
    /// An app showing `document`.
    #[must_use]
    pub fn new(document: MonitorDocument) -> Self {
        Self {
            document,
            ..Self::default()
        }
    }

    /// Replaces the report, keeping the selection on the same process when it is still there.
    pub fn update(&mut self, document: MonitorDocument) {
        let pid = self.tabs().get(self.tab).and_then(|tab| tab.pid);
        self.document = document;
        let tabs = self.tabs();
        self.tab = match pid {
            Some(pid) => tabs
                .iter()
                .position(|tab| tab.pid == Some(pid))
                .unwrap_or(0),
            None => 0,
        };
        self.clamp_selection();
    }

    /// The tab bar.
    #[must_use]
    pub fn tabs(&self) -> Vec<Tab> {
        view::tabs(&self.document)
    }

    /// The selected tab's view.
    #[must_use]
    pub fn view(&self) -> View {
        view::view(&self.document, self.tab)
    }

    /// The models tree as displayed, honouring expansions.
    #[must_use]
    pub fn tree(&self) -> Vec<TreeLine> {
        let mut lines = Vec::new();
        for model in self.view().models {
            let open = self.expanded.contains(&model.key);
            let marker = if open { "▾" } else { "▸" };
            lines.push(TreeLine {
                key: model.key.clone(),
                is_model: true,
                text: format!("{marker} {}", model.label),
            });
            if open {
                lines.extend(model.children.into_iter().map(|child| TreeLine {
                    key: model.key.clone(),
                    is_model: false,
                    text: format!("    {child}"),
                }));
            }
        }
        lines
    }

    fn clamp_selection(&mut self) {
        let len = self.tree().len();
        self.selected = self.selected.min(len.saturating_sub(1));
    }

    /// Applies one key event: Ctrl-C quits (the terminal is raw, so no signal comes), any
    /// other key as [`App::handle_key`].
    pub fn handle_event(&mut self, event: KeyEvent) {
        if event.modifiers.contains(KeyModifiers::CONTROL) && event.code == KeyCode::Char('c') {
            self.quit = true;
        } else {
            self.handle_key(event.code);
        }
    }

    /// Applies one key press.
    pub fn handle_key(&mut self, key: KeyCode) {
        let tab_count = self.tabs().len();
        match key {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char(digit @ '1'..='9') => {
                let index = usize::from(digit as u8 - b'1');
                if index < tab_count {
                    self.tab = index;
                    self.selected = 0;
                }
            }
            KeyCode::Char('a') | KeyCode::BackTab => {
                self.tab = (self.tab + tab_count - 1) % tab_count.max(1);
                self.selected = 0;
            }
            KeyCode::Char('d') | KeyCode::Tab => {
                self.tab = (self.tab + 1) % tab_count.max(1);
                self.selected = 0;
            }
            KeyCode::Char('f') => self.show_flops = !self.show_flops,
            KeyCode::Char('x') => {
                let keys: BTreeSet<String> = self
                    .view()
                    .models
                    .into_iter()
                    .map(|model| model.key)
                    .collect();
                if keys.iter().all(|key| self.expanded.contains(key)) {
                    self.expanded.retain(|key| !keys.contains(key));
                } else {
                    self.expanded.extend(keys);
                }
            }
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected += 1,
            KeyCode::Right | KeyCode::Enter => {
                if let Some(line) = self.tree().get(self.selected) {
                    self.expanded.insert(line.key.clone());
                }
            }
            KeyCode::Left => {
                if let Some(line) = self.tree().get(self.selected) {
                    let key = line.key.clone();
                    self.expanded.remove(&key);
                    // Back onto the model line of the folded subtree.
                    if let Some(position) = self.tree().iter().position(|l| l.key == key) {
                        self.selected = position;
                    }
                }
            }
            _ => {}
        }
        self.clamp_selection();
    }
}
