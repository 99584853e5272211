//! The corpus of a coverage-guided fuzzer, on syzkaller's model at a small scale.
//!
//! A program is a short sequence of steps; a step is the seed of the generator that makes all
//! of that step's choices (which call, which descriptor, which argument), so a program
//! replays exactly from a fresh state. Programs that reached module code no earlier program
//! reached join the corpus; new programs are mostly mutations of corpus programs (a step
//! reseeded, inserted, removed or duplicated, or two programs spliced), sometimes fresh.

use crate::rng::Rng;

/// Most steps in one program.
pub const MAX_STEPS: usize = 24;

/// A sequence of step seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program(pub Vec<u64>);

impl Program {
    /// A fresh random program of 1 to `MAX_STEPS / 2` steps.
    pub fn generate(rng: &mut Rng) -> Self {
        let len = 1 + rng.index(MAX_STEPS / 2);
        Self((0..len).map(|_| rng.next_u64()).collect())
    }
}

/// Programs that each reached new coverage when they ran.
#[derive(Debug, Default)]
pub struct Corpus {
    programs: Vec<Program>,
}

impl Corpus {
    /// Keeps `program`: it reached something new.
    pub fn add(&mut self, program: Program) {
        self.programs.push(program);
    }

    /// Programs kept so far.
    pub fn len(&self) -> usize {
        self.programs.len()
    }

    /// Whether nothing was kept yet.
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    /// The next program to run: one in five fresh, the others mutated from the corpus.
    pub fn next_program(&self, rng: &mut Rng) -> Program {
        if self.programs.is_empty() || rng.one_in(5) {
            return Program::generate(rng);
        }
        let mut program = self.programs[rng.index(self.programs.len())].clone();
        for _ in 0..1 + rng.index(3) {
            self.mutate(&mut program, rng);
        }
        program
    }

    fn mutate(&self, program: &mut Program, rng: &mut Rng) {
        let steps = &mut program.0;
        match rng.below(5) {
            0 if !steps.is_empty() => {
                let at = rng.index(steps.len());
                steps[at] = rng.next_u64();
            }
            1 if steps.len() < MAX_STEPS => {
                let at = rng.index(steps.len() + 1);
                steps.insert(at, rng.next_u64());
            }
            2 if steps.len() > 1 => {
                steps.remove(rng.index(steps.len()));
            }
            3 if !steps.is_empty() && steps.len() < MAX_STEPS => {
                let at = rng.index(steps.len());
                steps.insert(at, steps[at]);
            }
            _ => {
                let other = &self.programs[rng.index(self.programs.len())].0;
                let keep = rng.index(steps.len() + 1);
                let from = rng.index(other.len() + 1);
                steps.truncate(keep);
                steps.extend_from_slice(&other[from..]);
                steps.truncate(MAX_STEPS);
                if steps.is_empty() {
                    steps.push(rng.next_u64());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_stay_within_bounds_and_mutants_come_from_the_corpus() {
        let mut rng = Rng::new(5);
        let mut corpus = Corpus::default();
        for _ in 0..100 {
            let fresh = corpus.next_program(&mut rng);
            assert!((1..=MAX_STEPS / 2).contains(&fresh.0.len()), "{fresh:?}");
        }
        corpus.add(Program(vec![1, 2, 3]));
        corpus.add(Program(vec![7; MAX_STEPS]));
        let mut related = 0;
        for _ in 0..1000 {
            let program = corpus.next_program(&mut rng);
            assert!((1..=MAX_STEPS).contains(&program.0.len()), "{program:?}");
            if program.0.iter().any(|s| [1, 2, 3, 7].contains(s)) {
                related += 1;
            }
        }
        // About four in five are mutants, which keep most of their parent's steps.
        assert!(related > 700, "{related}");
    }
}
