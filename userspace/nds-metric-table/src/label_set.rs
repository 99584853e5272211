//! The labels of one series beyond the instance labels, built from its family's declaration:
//! the declared names come from the table, the caller gives only the values.

use crate::{MetricFamily, CLAIM_LABELS, INSTANCE_LABELS, POD_LABELS};

/// The container a series is about, as the pod labels name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodNames<'a> {
    /// The pod's name.
    pub pod: &'a str,
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The container's name.
    pub container: &'a str,
    /// The name and namespace of the ResourceClaim its devices came through (DRA), if any.
    pub claim: Option<(&'a str, &'a str)>,
}

/// The labels of one series as `(name, value)` pairs. Every name is the table's: a family's
/// declared labels ([`MetricFamily::label_set`]), the pod labels where the family carries
/// them ([`LabelSet::with_pod`]), or the instance labels ([`LabelSet::instance`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSet {
    pairs: Vec<(&'static str, String)>,
    /// Whether the family it was built for carries the pod labels.
    pods_allowed: bool,
}

impl MetricFamily {
    /// The labels of a series of this family: each declared label, in declaration order, with
    /// the value at its place in `values`.
    ///
    /// # Panics
    ///
    /// When `values` does not hold one value per declared label: a mistake in the caller that
    /// every rendering of the family would show.
    #[must_use]
    pub fn label_set(&'static self, values: &[&str]) -> LabelSet {
        assert_eq!(
            values.len(),
            self.labels.len(),
            "{} declares {:?}",
            self.name,
            self.labels
        );
        LabelSet {
            pairs: self
                .labels
                .iter()
                .zip(values)
                .map(|(&name, &value)| (name, value.to_owned()))
                .collect(),
            pods_allowed: self.pod_labels,
        }
    }
}

impl LabelSet {
    /// The instance labels every series carries, with `values` in [`INSTANCE_LABELS`]' order.
    #[must_use]
    pub fn instance(values: [&str; INSTANCE_LABELS.len()]) -> Self {
        Self {
            pairs: INSTANCE_LABELS
                .iter()
                .zip(values)
                .map(|(&name, value)| (name, value.to_owned()))
                .collect(),
            pods_allowed: false,
        }
    }

    /// These labels and the pod labels naming `pod` (and the claim labels, for a device that
    /// came through a claim), if there is one (a series no container holds has none of them).
    ///
    /// # Panics
    ///
    /// When `pod` is given for a family that does not carry the pod labels.
    #[must_use]
    pub fn with_pod(mut self, pod: Option<PodNames<'_>>) -> Self {
        if let Some(PodNames {
            pod,
            namespace,
            container,
            claim,
        }) = pod
        {
            assert!(self.pods_allowed, "pod labels on a family without them");
            let [pod_label, namespace_label, container_label] = POD_LABELS;
            self.pairs.extend([
                (pod_label, pod.to_owned()),
                (namespace_label, namespace.to_owned()),
                (container_label, container.to_owned()),
            ]);
            if let Some((name, claim_namespace)) = claim {
                let [name_label, claim_namespace_label] = CLAIM_LABELS;
                self.pairs.extend([
                    (name_label, name.to_owned()),
                    (claim_namespace_label, claim_namespace.to_owned()),
                ]);
            }
        }
        self
    }

    /// The labels, as built.
    #[must_use]
    pub fn pairs(&self) -> &[(&'static str, String)] {
        &self.pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EXECUTION_STATUS_TOTAL, NDS_RUNTIME_INFO};

    #[test]
    fn names_come_from_the_declaration_values_from_the_caller() {
        let labels = EXECUTION_STATUS_TOTAL.label_set(&["tag", "completed"]);
        assert_eq!(
            labels.pairs(),
            [
                ("runtime_tag", "tag".to_owned()),
                ("status_type", "completed".to_owned())
            ]
        );
        let pod = PodNames {
            pod: "p",
            namespace: "n",
            container: "c",
            claim: None,
        };
        let with_pod = NDS_RUNTIME_INFO
            .label_set(&["tag", "7", "0"])
            .with_pod(Some(pod));
        let names: Vec<&str> = with_pod.pairs().iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "runtime_tag",
                "pid",
                "neuron_device_index",
                "pod",
                "namespace",
                "container"
            ]
        );
        assert_eq!(
            NDS_RUNTIME_INFO
                .label_set(&["t", "1", "0"])
                .with_pod(None)
                .pairs()
                .len(),
            3
        );
        let claimed = PodNames {
            claim: Some(("p-neurons-4tq", "n")),
            ..pod
        };
        let with_claim = NDS_RUNTIME_INFO
            .label_set(&["t", "1", "0"])
            .with_pod(Some(claimed));
        assert_eq!(
            with_claim.pairs()[3..],
            [
                ("pod", "p".to_owned()),
                ("namespace", "n".to_owned()),
                ("container", "c".to_owned()),
                ("claim_name", "p-neurons-4tq".to_owned()),
                ("claim_namespace", "n".to_owned()),
            ]
        );
        let instance = LabelSet::instance(["a", "b", "c", "d", "e", "f"]);
        assert_eq!(instance.pairs()[5], ("subnet_id", "f".to_owned()));
    }

    #[test]
    #[should_panic(expected = "execution_status_total declares")]
    fn a_value_missing_is_refused() {
        let _ = EXECUTION_STATUS_TOTAL.label_set(&["tag"]);
    }

    #[test]
    #[should_panic(expected = "pod labels on a family without them")]
    fn pod_labels_only_where_declared() {
        let pod = PodNames {
            pod: "p",
            namespace: "n",
            container: "c",
            claim: None,
        };
        let _ = EXECUTION_STATUS_TOTAL
            .label_set(&["tag", "completed"])
            .with_pod(Some(pod));
    }
}
