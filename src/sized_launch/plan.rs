//! The size classes of a sized launch: their bounds, checked before any driver call.
use super::params::CLASSES_MAX;
use crate::error::{Error, Result};

/// How the classes are chosen: a geometric ladder from `smallest` by `growth` up to the
/// capacity, bounds given one by one, or one class (the capacity) whose one kernel gets a grid
/// of ceil(count / `items_per_block`) blocks on the device (the exact-grid form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClassPlan {
    Ladder { smallest: u64, growth: u64 },
    Given(Vec<u64>),
    ExactGrid { items_per_block: u64 },
}

/// The largest grid the exact-grid form sets (`gridDim.x`'s limit).
pub(crate) const MAX_GRID_X: u64 = (1 << 31) - 1;

/// The items per block the exact-grid form's setter is given for `capacity`: at most the
/// capacity, which sets the same grids (1 block for any count up to the capacity), so that its
/// ceil(n / k) as (n + k - 1) / k cannot wrap for `exact_grid(u64::MAX)` and the like.
pub(crate) fn setter_items_per_block(items_per_block: u64, capacity: u64) -> u64 {
    items_per_block.min(capacity).max(1)
}

impl Default for ClassPlan {
    /// Classes 1024, 4096, 16384, ... up to the capacity: a body is sized for at most 4x the
    /// count above 1024, and 2^22 takes 7 bodies (the probe's design, docs/design/sized-launch.md).
    fn default() -> Self {
        ClassPlan::Ladder {
            smallest: 1024,
            growth: 4,
        }
    }
}

/// The classes' `n_max`, ascending, the last one `capacity`.
pub(crate) fn bounds(plan: &ClassPlan, capacity: u64) -> Result<Vec<u64>> {
    if capacity == 0 {
        return Err(Error::config(
            "a sized launch needs a capacity of at least 1",
        ));
    }
    let v = match plan {
        ClassPlan::Ladder { smallest, growth } => {
            if *smallest == 0 {
                return Err(Error::config(
                    "the smallest size class must hold at least 1",
                ));
            }
            if *growth < 2 {
                return Err(Error::config(format!(
                    "size classes must grow by a factor of at least 2, not {growth}"
                )));
            }
            let mut v = vec![(*smallest).min(capacity)];
            while *v.last().expect("one class") < capacity {
                let next = v.last().expect("one class").saturating_mul(*growth);
                v.push(next.min(capacity));
            }
            v
        }
        ClassPlan::ExactGrid { items_per_block } => {
            if *items_per_block == 0 {
                return Err(Error::config(
                    "the exact-grid form needs at least 1 item per block",
                ));
            }
            let blocks = capacity.div_ceil(*items_per_block);
            if blocks > MAX_GRID_X {
                return Err(Error::config(format!(
                    "a capacity of {capacity} at {items_per_block} items per block needs \
                     {blocks} blocks, past gridDim.x's limit of {MAX_GRID_X}"
                )));
            }
            // The setter's (n + k - 1) for n up to the capacity must not wrap.
            let k = setter_items_per_block(*items_per_block, capacity);
            if capacity.checked_add(k - 1).is_none() {
                return Err(Error::config(format!(
                    "a capacity of {capacity} at {items_per_block} items per block: the \
                     grid's arithmetic would pass 2^64"
                )));
            }
            vec![capacity]
        }
        ClassPlan::Given(v) => {
            if v.is_empty() {
                return Err(Error::config(
                    "a sized launch needs at least one size class",
                ));
            }
            if v[0] == 0 || v.windows(2).any(|w| w[0] >= w[1]) {
                return Err(Error::config(format!(
                    "size classes must be ascending and non-zero: {v:?}"
                )));
            }
            if *v.last().expect("non-empty") != capacity {
                return Err(Error::config(format!(
                    "the last size class ({}) must be the capacity ({capacity})",
                    v.last().expect("non-empty")
                )));
            }
            v.clone()
        }
    };
    if v.len() > CLASSES_MAX {
        return Err(Error::config(format!(
            "{} size classes: at most {CLASSES_MAX} (grow the classes faster or start larger)",
            v.len()
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_ladder_grows_by_four_to_the_capacity() {
        let b = bounds(&ClassPlan::default(), 1 << 22).unwrap();
        assert_eq!(
            b,
            vec![
                1 << 10,
                1 << 12,
                1 << 14,
                1 << 16,
                1 << 18,
                1 << 20,
                1 << 22
            ]
        );
        assert_eq!(
            bounds(&ClassPlan::default(), 5000).unwrap(),
            vec![1024, 4096, 5000]
        );
        assert_eq!(bounds(&ClassPlan::default(), 100).unwrap(), vec![100]);
        assert_eq!(bounds(&ClassPlan::default(), u64::MAX).unwrap().len(), 28);
    }

    #[test]
    fn bad_plans_are_config_errors() {
        let cfg = |p: ClassPlan, cap| matches!(bounds(&p, cap), Err(Error::InvalidConfig { .. }));
        assert!(cfg(ClassPlan::default(), 0));
        assert!(cfg(
            ClassPlan::Ladder {
                smallest: 0,
                growth: 4
            },
            10
        ));
        assert!(cfg(
            ClassPlan::Ladder {
                smallest: 1,
                growth: 1
            },
            10
        ));
        assert!(cfg(ClassPlan::Given(vec![]), 10));
        assert!(cfg(ClassPlan::Given(vec![4, 4, 10]), 10));
        assert!(cfg(ClassPlan::Given(vec![0, 10]), 10));
        assert!(cfg(ClassPlan::Given(vec![4, 8]), 10));
        assert!(cfg(
            ClassPlan::Ladder {
                smallest: 1,
                growth: 2
            },
            u64::MAX
        ));
        assert_eq!(
            bounds(&ClassPlan::Given(vec![3, 10]), 10).unwrap(),
            vec![3, 10]
        );
    }

    #[test]
    fn the_exact_grid_form_is_one_class_whose_grid_fits() {
        let grid = |items_per_block| ClassPlan::ExactGrid { items_per_block };
        assert_eq!(bounds(&grid(256), 1 << 22).unwrap(), vec![1 << 22]);
        assert_eq!(bounds(&grid(1), MAX_GRID_X).unwrap(), vec![MAX_GRID_X]);
        let refused = |plan, capacity| match bounds(&plan, capacity) {
            Err(Error::InvalidConfig { reason }) => reason,
            other => panic!("{other:?}"),
        };
        assert!(refused(grid(0), 10).contains("at least 1 item per block"));
        assert!(refused(grid(1), MAX_GRID_X + 1).contains("past gridDim.x's limit"));
        assert!(refused(grid(256), u64::MAX).contains("past gridDim.x's limit"));
        assert!(refused(grid(256), 0).contains("capacity of at least 1"));
        // Items per block past the capacity set 1 block, given to the setter as the capacity.
        assert_eq!(bounds(&grid(u64::MAX), 64).unwrap(), vec![64]);
        assert_eq!(setter_items_per_block(u64::MAX, 64), 64);
        assert_eq!(setter_items_per_block(256, 1 << 22), 256);
        assert_eq!(setter_items_per_block(256, 1), 1);
        assert!(refused(grid(1 << 40), u64::MAX).contains("would pass 2^64"));
        assert_eq!(bounds(&grid(1 << 40), 1 << 62).unwrap(), vec![1 << 62]);
    }
}
