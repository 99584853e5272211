//! The screen: title, utilization, executions and errors, memory, models tree, tab bar.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Tabs};
use ratatui::Frame;

use crate::app::App;
use crate::view::{mib, View};

/// Width of a utilization bar, in cells.
const BAR_WIDTH: usize = 10;

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [title, top, middle, tabs] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let [cores, executions] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(top);
    let [memory, models] =
        Layout::horizontal([Constraint::Percentage(56), Constraint::Percentage(44)]).areas(middle);
    let view = app.view();
    draw_title(frame, title, app);
    draw_cores(frame, cores, &view, app.show_flops);
    draw_executions(frame, executions, &view);
    draw_memory(frame, memory, &view);
    draw_models(frame, models, app);
    draw_tabs(frame, tabs, app);
}

fn draw_title(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let document = &app.document;
    let hardware = &document.neuron_hardware_info;
    let processes = document
        .neuron_runtime_data
        .iter()
        .filter(|entry| entry.error.is_empty())
        .count();
    let instance = &document.instance_info;
    // As neuron-top: the version, then the instance id and type.
    let identity = match (
        instance.instance_id.as_str(),
        instance.instance_type.as_str(),
    ) {
        ("", "") => "instance unknown".to_owned(),
        (id, "") => id.to_owned(),
        ("", kind) => kind.to_owned(),
        (id, kind) => format!("{id} ({kind})"),
    };
    let text = format!(
        " nds-top {} | {identity} | {} devices x {} cores | {} processes",
        env!("CARGO_PKG_VERSION"),
        hardware.neuron_device_count,
        hardware.neuroncore_per_device_count,
        processes
    );
    let style = Style::default().add_modifier(Modifier::REVERSED);
    frame.render_widget(Paragraph::new(text).style(style), area);
}

fn bar(percent: f64) -> String {
    let filled = ((percent / 100.0) * BAR_WIDTH as f64)
        .round()
        .clamp(0.0, BAR_WIDTH as f64);
    let filled = filled as usize;
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR_WIDTH - filled))
}

fn draw_cores(frame: &mut Frame<'_>, area: Rect, view: &View, show_flops: bool) {
    let title = if show_flops {
        " NeuronCores (TFLOP/s) "
    } else {
        " NeuronCore utilization "
    };
    let mut lines: Vec<Line<'_>> = view
        .cores
        .iter()
        .map(|core| {
            let measure = if show_flops {
                format!("{:>7.3} TF", core.flops / 1e12)
            } else {
                format!("{} {:>5.1}%", bar(core.utilization), core.utilization)
            };
            Line::from(format!(
                "{:<13} {measure} {:>6.0}/s",
                core.label, core.throughput
            ))
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::from("no NeuronCore in use"));
    }
    let block = Block::default().borders(Borders::ALL).title(title);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_executions(frame: &mut Frame<'_>, area: Rect, view: &View) {
    let (period, total, errors) = (&view.executions, &view.executions_total, &view.errors_total);
    let row = |name: &str, now: u64, all: u64| Line::from(format!("{name:<16}{now:>7}{all:>9}"));
    let mut lines = vec![
        Line::from(Span::styled(
            format!("{:<16}{:>7}{:>9}", "executions", "period", "total"),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        row("completed", period.completed, total.completed),
        row(
            "with error",
            period.completed_with_err,
            total.completed_with_err,
        ),
        row(
            "numerical err",
            period.completed_with_num_err,
            total.completed_with_num_err,
        ),
        row("timed out", period.timed_out, total.timed_out),
        row("bad input", period.incorrect_input, total.incorrect_input),
        row(
            "failed to queue",
            period.failed_to_queue,
            total.failed_to_queue,
        ),
        Line::from(format!(
            "errors hw {} generic {} num {} rt {}",
            errors.hardware, errors.generic, errors.numerical, errors.runtime
        )),
    ];
    lines.extend(
        view.notes
            .iter()
            .map(|note| Line::from(Span::styled(note.clone(), Style::default().fg(Color::Red)))),
    );
    let block = Block::default().borders(Borders::ALL).title(" Executions ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_memory(frame: &mut Frame<'_>, area: Rect, view: &View) {
    let host = &view.host;
    let device = &view.device;
    // Slab contents are untrusted: sums wrap rather than overflow.
    let sum = |values: &[u64]| values.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let host_total = sum(&[
        host.application_memory,
        host.constants,
        host.dma_buffers,
        host.tensors,
    ]);
    let device_total = sum(&[
        device.constants,
        device.model_code,
        device.model_shared_scratchpad,
        device.runtime_memory,
        device.tensors,
    ]);
    let pair = |a: &str, x: u64, b: &str, y: u64| {
        Line::from(format!("  {a:<10}{:>9}  {b:<10}{:>9}", mib(x), mib(y)))
    };
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let lines = vec![
        Line::from(Span::styled(
            format!("host total {:>13}", mib(host_total)),
            bold,
        )),
        pair("tensors", host.tensors, "constants", host.constants),
        pair(
            "dma bufs",
            host.dma_buffers,
            "app memory",
            host.application_memory,
        ),
        Line::from(Span::styled(
            format!("device total {:>11}", mib(device_total)),
            bold,
        )),
        pair("tensors", device.tensors, "constants", device.constants),
        pair(
            "model code",
            device.model_code,
            "runtime",
            device.runtime_memory,
        ),
        Line::from(format!(
            "  {:<10}{:>9}",
            "scratchpad",
            mib(device.model_shared_scratchpad)
        )),
    ];
    let block = Block::default().borders(Borders::ALL).title(" Memory ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_models(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let items: Vec<ListItem<'_>> = app
        .tree()
        .into_iter()
        .map(|line| ListItem::new(line.text))
        .collect();
    let empty = items.is_empty();
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" Models (* ran this period) ");
    let list = List::new(if empty {
        vec![ListItem::new("no model loaded")]
    } else {
        items
    })
    .block(block)
    .highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = ListState::default();
    if !empty {
        state.select(Some(app.selected));
    }
    frame.render_stateful_widget(list, area, &mut state);
}

fn draw_tabs(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let titles: Vec<String> = app
        .tabs()
        .iter()
        .enumerate()
        .map(|(index, tab)| match index {
            0..=8 => format!("{}:{}", index + 1, tab.title),
            _ => tab.title.clone(),
        })
        .collect();
    let tabs = Tabs::new(titles)
        .select(app.tab)
        .highlight_style(
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        )
        .divider("|");
    frame.render_widget(tabs, area);
}
