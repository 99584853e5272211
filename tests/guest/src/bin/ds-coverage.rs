//! Adds up the coverage files of the campaigns:
//! `ds-coverage SITES REASONS NAME=DIR [NAME=DIR...]`.
//!
//! SITES lists the module's instrumentation points, one per line: section, offset of the
//! point (the return address of its `__sanitizer_cov_trace_pc` call) in hex, its class (0:
//! module code; 1: KUnit test code, not counted; 2: module code nothing in the module refers
//! to), whether its block ends in a panic (1), its source line (`-`: none) and the function,
//! demangled (`tests/coverage_sites.py` makes it from the .ko). Each DIR holds the `.cov`
//! files the processes of one campaign wrote (`kcov::Collector`). Prints, per campaign and
//! for all of them together, the points reached out of the module's non-KUnit points, then
//! every function no campaign reached, each with the reason REASONS gives for it, then the
//! functions reached in part with the source lines of the points not reached (those of a
//! failed check, which only a bug reaches, counted apart), and ends with
//! `coverage: N of M module PCs (P%)`.
//!
//! REASONS says why functions cannot be reached, one per line: a part of the demangled name,
//! a tab, the reason (`#` starts a comment). The first line whose part the name contains
//! gives its reason; "nothing in the module refers to it" needs no line.

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    fs,
    process::exit,
};

/// An instrumentation point: section and offset.
type Site = (String, u64);

/// What SITES says of a point outside KUnit tests.
struct Point {
    function: String,
    /// Its source file in this repository and line, if it has one.
    source: Option<(String, u32)>,
    /// Its block ends in a panic: an overflow, bounds or assertion check failed.
    panics: bool,
}

struct Sites {
    /// Non-KUnit points.
    counted: BTreeMap<Site, Point>,
    /// Functions nothing in the module refers to.
    unreferenced: BTreeSet<String>,
    /// Points in KUnit test functions.
    kunit: BTreeSet<Site>,
}

fn read_sites(path: &str) -> Sites {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut sites = Sites {
        counted: BTreeMap::new(),
        unreferenced: BTreeSet::new(),
        kunit: BTreeSet::new(),
    };
    for line in text.lines() {
        let fields: Vec<&str> = line.splitn(6, '\t').collect();
        let [section, offset, kunit, panics, source, function] = fields[..] else {
            panic!("{path}: bad line {line:?}");
        };
        let site = (
            section.to_owned(),
            u64::from_str_radix(offset, 16).expect("hex offset"),
        );
        match kunit {
            "1" => {
                sites.kunit.insert(site);
            }
            class => {
                if class == "2" {
                    sites.unreferenced.insert(function.to_owned());
                }
                let source = match source {
                    "-" => None,
                    _ => Some(
                        source
                            .rsplit_once(':')
                            .and_then(|(file, line)| Some((file.to_owned(), line.parse().ok()?)))
                            .unwrap_or_else(|| panic!("{path}: bad source line in {line:?}")),
                    ),
                };
                let point = Point {
                    function: function.to_owned(),
                    source,
                    panics: panics == "1",
                };
                sites.counted.insert(site, point);
            }
        }
    }
    sites
}

/// Places addresses traced while the module was loaded but whose sections were not known (a
/// load that failed before its sections could be read). Each code section of that load
/// started somewhere: for each section, the starts that put the most addresses on its points
/// are found (tried from addresses spread over the whole range, so that every section's
/// cluster of addresses has one, each against every point), and the few best of each (those
/// explaining two addresses at least: a start explaining one is chance) are combined, one
/// start or none per section, to explain the most addresses together; among combinations
/// explaining as many, the one with the most page-aligned starts is taken (each region of
/// module memory starts on a page, and its first section, `.text` or `.init.text`, with it).
/// Combined, a section cannot take by chance the few addresses of another because it would
/// explain as many: the pair that explains both sections' addresses wins. Returns the placed
/// points and the addresses left over.
fn place(addresses: &[u64], sites: &Sites) -> (Vec<Site>, Vec<u64>) {
    const ANCHORS: usize = 8;
    /// Starts kept per section for the combinations.
    const CANDIDATES: usize = 12;
    const PAGE: u64 = 4096;
    let mut sections: BTreeMap<&str, HashSet<u64>> = BTreeMap::new();
    for (section, offset) in sites.counted.keys().chain(sites.kunit.iter()) {
        sections
            .entry(section.as_str())
            .or_default()
            .insert(*offset);
    }
    let mut sorted = addresses.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let anchors: Vec<u64> = sorted
        .iter()
        .step_by(sorted.len().div_ceil(ANCHORS).max(1))
        .copied()
        .collect();
    let candidates: Vec<SectionStarts> = sections
        .iter()
        .map(|(&section, points)| {
            let starts: BTreeSet<u64> = anchors
                .iter()
                .flat_map(|&anchor| points.iter().filter_map(move |&p| anchor.checked_sub(p)))
                .collect();
            let mut best: Vec<Start> = starts
                .into_iter()
                .map(|start| Start {
                    explains: sorted
                        .iter()
                        .map(|&a| a.checked_sub(start).is_some_and(|o| points.contains(&o)))
                        .collect(),
                    aligned: start % PAGE == 0,
                    start,
                })
                .filter(|start| start.hits() >= 2)
                .collect();
            best.sort_unstable_by_key(|s| std::cmp::Reverse((s.hits(), s.aligned, s.start)));
            best.truncate(CANDIDATES);
            SectionStarts { section, best }
        })
        .collect();
    let mut chosen = vec![None; candidates.len()];
    let mut best = Combination {
        chosen: chosen.clone(),
        score: (0, 0),
    };
    combine(0, &candidates, &mut chosen, sorted.len(), &mut best);
    // Each address goes to the first chosen section that explains it.
    let mut placed = Vec::new();
    let mut left = Vec::new();
    for &address in addresses {
        let Ok(position) = sorted.binary_search(&address) else {
            continue;
        };
        let site = candidates
            .iter()
            .zip(&best.chosen)
            .find_map(|(starts, choice)| {
                let start = &starts.best[(*choice)?];
                start.explains[position].then(|| (starts.section.to_owned(), address - start.start))
            });
        match site {
            Some(site) => placed.push(site),
            None => left.push(address),
        }
    }
    (placed, left)
}

/// Where a section may have started, for [`place`].
struct Start {
    /// Per address (sorted), whether this start puts it on one of the section's points.
    explains: Vec<bool>,
    aligned: bool,
    start: u64,
}

impl Start {
    fn hits(&self) -> usize {
        self.explains.iter().filter(|&&e| e).count()
    }
}

/// A section's best starts.
struct SectionStarts<'a> {
    section: &'a str,
    best: Vec<Start>,
}

/// One start (an index into its section's best) or none per section, and its score: the
/// addresses explained, then the page-aligned starts.
struct Combination {
    chosen: Vec<Option<usize>>,
    score: (usize, usize),
}

/// Tries every combination of the sections from `level` on, keeping the best in `best`.
fn combine(
    level: usize,
    candidates: &[SectionStarts],
    chosen: &mut Vec<Option<usize>>,
    width: usize,
    best: &mut Combination,
) {
    let Some(section) = candidates.get(level) else {
        let mut covered = vec![false; width];
        let mut aligned = 0;
        for (starts, choice) in candidates.iter().zip(chosen.iter()) {
            if let Some(start) = choice.map(|index| &starts.best[index]) {
                covered
                    .iter_mut()
                    .zip(&start.explains)
                    .for_each(|(c, e)| *c |= e);
                aligned += usize::from(start.aligned);
            }
        }
        let score = (covered.iter().filter(|&&c| c).count(), aligned);
        if score > best.score {
            *best = Combination {
                chosen: chosen.clone(),
                score,
            };
        }
        return;
    };
    for choice in std::iter::once(None).chain((0..section.best.len()).map(Some)) {
        chosen[level] = choice;
        combine(level + 1, candidates, chosen, width, best);
    }
    chosen[level] = None;
}

/// The points one campaign reached: counted ones, and how many matched no point at all.
struct Reached {
    counted: BTreeSet<Site>,
    kunit: usize,
    unmatched: usize,
}

fn read_campaign(dir: &str, sites: &Sites) -> Reached {
    let mut all = BTreeSet::new();
    let mut unmatched = BTreeSet::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "cov") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("coverage file");
        let mut located = Vec::new();
        let mut addresses = Vec::new();
        for line in text.lines() {
            let Some((section, offset)) = line.split_once(' ') else {
                continue;
            };
            let Ok(offset) = u64::from_str_radix(offset, 16) else {
                continue;
            };
            if section == "?" {
                addresses.push(offset);
            } else {
                located.push((section.to_owned(), offset));
            }
        }
        let (placed, lost) = place(&addresses, sites);
        unmatched.extend(lost.into_iter().map(|pc| ("?".to_owned(), pc)));
        for site in located.into_iter().chain(placed) {
            if sites.counted.contains_key(&site) || sites.kunit.contains(&site) {
                all.insert(site);
            } else {
                unmatched.insert(site);
            }
        }
    }
    let kunit = all.iter().filter(|s| sites.kunit.contains(*s)).count();
    Reached {
        counted: all
            .into_iter()
            .filter(|s| sites.counted.contains_key(s))
            .collect(),
        kunit,
        unmatched: unmatched.len(),
    }
}

/// Why functions are never reached: (part of the name, reason), first match wins.
fn read_reasons(path: &str) -> Vec<(String, String)> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (part, reason) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("{path}: no tab in {l:?}"));
            (part.to_owned(), reason.trim().to_owned())
        })
        .collect()
}

/// The reason a never-reached function has, if any.
fn reason_for<'a>(
    function: &str,
    sites: &Sites,
    reasons: &'a [(String, String)],
) -> Option<&'a str> {
    if sites.unreferenced.contains(function) {
        return Some("nothing in the module refers to it");
    }
    reasons
        .iter()
        .find(|(part, _)| function.contains(part.as_str()))
        .map(|(_, reason)| reason.as_str())
}

/// The points' source lines, by file: `rust/a.rs:10, 12 (2); rust/b.rs:7`, then how many
/// have none.
fn source_lines(points: &[&Point]) -> String {
    let mut by_file: BTreeMap<&str, BTreeMap<u32, usize>> = BTreeMap::new();
    let mut without = 0;
    for point in points {
        match &point.source {
            Some((file, line)) => *by_file.entry(file).or_default().entry(*line).or_default() += 1,
            None => without += 1,
        }
    }
    let mut parts: Vec<String> = by_file
        .iter()
        .map(|(file, lines)| {
            let lines: Vec<String> = lines
                .iter()
                .map(|(line, n)| match n {
                    1 => line.to_string(),
                    n => format!("{line} ({n})"),
                })
                .collect();
            format!("{file}:{}", lines.join(", "))
        })
        .collect();
    if without > 0 {
        parts.push(format!("{without} without a source line (compiler glue)"));
    }
    parts.join("; ")
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn line(name: &str, reached: &Reached, total: usize) {
    println!(
        "{name:<16} {:>6} of {total} module PCs ({:.1}%){}",
        reached.counted.len(),
        percent(reached.counted.len(), total),
        if reached.unmatched > 0 || reached.kunit > 0 {
            format!(
                "  [{} KUnit points, {} points matching no instrumentation point]",
                reached.kunit, reached.unmatched
            )
        } else {
            String::new()
        }
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [sites_path, reasons_path, rest @ ..] = &args[..] else {
        eprintln!("usage: ds-coverage SITES REASONS NAME=DIR...");
        exit(2);
    };
    let sites = read_sites(sites_path);
    let reasons = read_reasons(reasons_path);
    let total = sites.counted.len();
    let parse = |arg: &String| {
        let (name, dir) = arg.split_once('=').expect("NAME=DIR");
        (name.to_owned(), read_campaign(dir, &sites))
    };
    println!(
        "\n== module coverage ({total} instrumentation points outside KUnit tests, {} in them)",
        sites.kunit.len()
    );
    let mut combined = Reached {
        counted: BTreeSet::new(),
        kunit: 0,
        unmatched: 0,
    };
    for (name, reached) in rest.iter().map(parse) {
        line(&name, &reached, total);
        combined.counted.extend(reached.counted.iter().cloned());
    }
    line("combined", &combined, total);
    // Functions by points reached / points, with the points not reached.
    let mut functions: BTreeMap<&str, (usize, usize, Vec<&Point>)> = BTreeMap::new();
    for (site, point) in &sites.counted {
        let entry = functions.entry(&point.function).or_default();
        entry.1 += 1;
        if combined.counted.contains(site) {
            entry.0 += 1;
        } else {
            entry.2.push(point);
        }
    }
    let never: Vec<_> = functions
        .iter()
        .filter(|(_, (hit, _, _))| *hit == 0)
        .collect();
    println!(
        "\n== functions never reached ({} of {}, {} points)",
        never.len(),
        functions.len(),
        never.iter().map(|(_, (_, n, _))| n).sum::<usize>()
    );
    let mut unexplained = 0;
    for (function, (_, points, _)) in &never {
        let reason = reason_for(function, &sites, &reasons).unwrap_or_else(|| {
            unexplained += 1;
            "NO REASON RECORDED"
        });
        println!("{points:>5}  {function}\n         {reason}");
    }
    println!("{unexplained} functions never reached have no recorded reason");
    let partial: Vec<_> = functions
        .iter()
        .filter(|(_, (hit, all, _))| *hit > 0 && hit < all)
        .collect();
    println!(
        "\n== functions reached in part (points reached / points), with the source lines of \
         the points not reached"
    );
    let (mut missed_panics, mut missed_lines, mut missed_glue) = (0, 0, 0);
    for (function, (hit, all, missed)) in partial {
        println!("{hit:>5} / {all:<5} {function}");
        let (panics, others): (Vec<&Point>, Vec<&Point>) = missed.iter().partition(|p| p.panics);
        missed_panics += panics.len();
        let with_line = others.iter().filter(|p| p.source.is_some()).count();
        missed_lines += with_line;
        missed_glue += others.len() - with_line;
        if !panics.is_empty() {
            println!("              {} of a failed check (panic)", panics.len());
        }
        if !others.is_empty() {
            println!("              {}", source_lines(&others));
        }
    }
    println!(
        "{} points not reached in these functions: {missed_panics} of a failed check, \
         {missed_glue} without a source line, {missed_lines} by source line above",
        missed_panics + missed_glue + missed_lines
    );
    println!(
        "\ncoverage: {} of {total} module PCs ({:.1}%)",
        combined.counted.len(),
        percent(combined.counted.len(), total)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(function: &str, source: Option<(&str, u32)>, panics: bool) -> Point {
        Point {
            function: function.to_owned(),
            source: source.map(|(file, line)| (file.to_owned(), line)),
            panics,
        }
    }

    #[test]
    fn source_lines_are_grouped_by_file_with_repeats_counted() {
        let points = [
            point("f", Some(("rust/b.rs", 7)), false),
            point("f", Some(("rust/a.rs", 12)), false),
            point("f", None, false),
            point("f", Some(("rust/a.rs", 10)), false),
            point("f", Some(("rust/a.rs", 12)), false),
        ];
        let refs: Vec<&Point> = points.iter().collect();
        assert_eq!(
            source_lines(&refs),
            "rust/a.rs:10, 12 (2); rust/b.rs:7; 1 without a source line (compiler glue)"
        );
    }

    #[test]
    fn a_never_reached_function_gets_the_first_reason_whose_part_its_name_contains() {
        let mut sites = Sites {
            counted: BTreeMap::new(),
            unreferenced: BTreeSet::new(),
            kunit: BTreeSet::new(),
        };
        sites.unreferenced.insert("abi::c_text".to_owned());
        let reasons = vec![
            ("init".to_owned(), "an unwinding branch".to_owned()),
            ("::".to_owned(), "anything else".to_owned()),
        ];
        assert_eq!(
            reason_for("neuron_ds::init", &sites, &reasons),
            Some("an unwinding branch")
        );
        assert_eq!(
            reason_for("abi::c_text", &sites, &reasons),
            Some("nothing in the module refers to it")
        );
        assert_eq!(reason_for("plain", &sites, &reasons), None);
    }

    /// Sites with counted points at `offsets` of each section (function "f").
    fn counted_sites(sections: &[(&str, &[u64])]) -> Sites {
        let mut sites = Sites {
            counted: BTreeMap::new(),
            unreferenced: BTreeSet::new(),
            kunit: BTreeSet::new(),
        };
        for (section, offsets) in sections {
            for offset in offsets.iter() {
                sites
                    .counted
                    .insert(((*section).to_owned(), *offset), point("f", None, false));
            }
        }
        sites
    }

    #[test]
    fn addresses_of_a_failed_load_are_placed_where_two_or_more_land_on_points() {
        let sites = counted_sites(&[(".text", &[0x10, 0x20, 0x30]), (".init.text", &[0x5])]);
        let (placed, left) = place(&[0x1010, 0x9005, 0x1030, 0x7777], &sites);
        assert_eq!(
            placed,
            [(".text".to_owned(), 0x10), (".text".to_owned(), 0x30)]
        );
        assert_eq!(left, [0x9005, 0x7777]);
    }

    #[test]
    fn a_section_with_few_points_cannot_take_the_addresses_of_one_that_explains_more() {
        // Two .init.text points 0x10 apart: at start 0x100b they would explain 0x1010 and
        // 0x1020.
        let sites = counted_sites(&[
            (".text", &[0x10, 0x20, 0x30, 0x40, 0x50]),
            (".init.text", &[0x5, 0x15]),
        ]);
        // The first addresses are all of .text; .init.text's two come last, far away.
        let addresses = [0x1010, 0x1020, 0x1030, 0x1040, 0x1050, 0x9005, 0x9015];
        let (mut placed, left) = place(&addresses, &sites);
        placed.sort();
        let expected: Vec<Site> = [(".init.text", 0x5), (".init.text", 0x15)]
            .into_iter()
            .chain([0x10, 0x20, 0x30, 0x40, 0x50].map(|o| (".text", o)))
            .map(|(section, offset)| (section.to_owned(), offset))
            .collect();
        assert_eq!(placed, expected);
        assert!(left.is_empty(), "{left:x?}");
    }

    #[test]
    fn a_load_that_reached_two_points_of_each_section_is_placed_whole() {
        // A refused parameter: two points of `init` in .text, two of the init wrapper in
        // .init.text. A .text start at 0x1fb000 would put the .init.text addresses on the
        // .text points 0x500c and 0x506c, explaining as many as the true one; placed apart,
        // .text took them and the true .text addresses were left over.
        let sites = counted_sites(&[
            (".text", &[0x10, 0x20, 0x500c, 0x506c]),
            (".init.text", &[0xc, 0x6c]),
        ]);
        let addresses = [0x10_0010, 0x20_000c, 0x10_0020, 0x20_006c];
        let (mut placed, left) = place(&addresses, &sites);
        placed.sort();
        let expected: Vec<Site> = [
            (".init.text", 0xc),
            (".init.text", 0x6c),
            (".text", 0x10),
            (".text", 0x20),
        ]
        .into_iter()
        .map(|(section, offset)| (section.to_owned(), offset))
        .collect();
        assert_eq!(placed, expected);
        assert!(left.is_empty(), "{left:x?}");
    }

    #[test]
    fn of_starts_that_explain_as_many_addresses_the_page_aligned_one_is_taken() {
        // Points 0x100 apart: a load at 0x3000 that reached 0x100 and 0x200 is explained as
        // well by a start at 0x3100 that put them on 0x000 and 0x100.
        let sites = counted_sites(&[(".text", &[0x0, 0x100, 0x200])]);
        let (placed, left) = place(&[0x3100, 0x3200], &sites);
        assert_eq!(
            placed,
            [(".text".to_owned(), 0x100), (".text".to_owned(), 0x200)]
        );
        assert!(left.is_empty());
    }
}
