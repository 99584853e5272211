//! The verdicts' families, written with the exposition's one text encoder: each device's and
//! NeuronCore's state one-hot over the three states, and each device's reason one-hot over the
//! closed set of reasons, each with its recommended action under the rules in force (so that
//! every series keeps its labels for its life, and a query needs no absent-series logic).

use nds_document::health::{Action, HealthGroup, HealthRules, HealthState, Reason};
use nds_exporter::encoder::{render_labels, Encoder};
use nds_metric_table::{
    LabelSet, MetricFamily, NDS_DEVICE_HEALTH_REASON, NDS_DEVICE_HEALTH_STATE,
    NDS_NEURONCORE_HEALTH_STATE,
};

/// The action a verdict for `reason` recommends under `rules`.
fn action_of(rules: &HealthRules, reason: Reason) -> Action {
    rules
        .rule(reason)
        .map_or(Action::Monitor, |rule| rule.action)
}

fn start(encoder: &mut Encoder, family: &MetricFamily) {
    encoder.family(family.name, family.help, family.metric_type);
}

fn one(encoder: &mut Encoder, family: &'static MetricFamily, values: &[&str], on: bool) {
    let labels = render_labels(&family.label_set(values));
    encoder.sample(family.name, &labels, None, f64::from(u8::from(on)));
}

/// The families of `group` under `rules`, every sample with the `instance` labels.
#[must_use]
pub fn encode(group: &HealthGroup, rules: &HealthRules, instance: &LabelSet) -> String {
    let mut encoder = Encoder::new(instance);
    if group.devices.is_empty() {
        return String::new();
    }
    start(&mut encoder, &NDS_DEVICE_HEALTH_STATE);
    for device in &group.devices {
        let index = device.neuron_device_index.to_string();
        for state in HealthState::ALL {
            let on = device.judged.verdict.state == state;
            one(
                &mut encoder,
                &NDS_DEVICE_HEALTH_STATE,
                &[&index, state.name()],
                on,
            );
        }
    }
    start(&mut encoder, &NDS_DEVICE_HEALTH_REASON);
    for device in &group.devices {
        let index = device.neuron_device_index.to_string();
        for reason in Reason::ALL {
            let action = action_of(rules, reason).name();
            let on = device.judged.verdict.reason == reason;
            let values = [index.as_str(), reason.name(), action];
            one(&mut encoder, &NDS_DEVICE_HEALTH_REASON, &values, on);
        }
    }
    start(&mut encoder, &NDS_NEURONCORE_HEALTH_STATE);
    for device in &group.devices {
        let index = device.neuron_device_index.to_string();
        for core in &device.neuroncores {
            let core_index = core.neuroncore_index.to_string();
            for state in HealthState::ALL {
                let on = core.judged.verdict.state == state;
                let values = [index.as_str(), core_index.as_str(), state.name()];
                one(&mut encoder, &NDS_NEURONCORE_HEALTH_STATE, &values, on);
            }
        }
    }
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nds_document::health::{CoreHealth, DeviceHealth, Evidence, Judged};

    use super::*;

    #[test]
    fn each_device_and_core_has_one_series_per_state_and_reason_one_of_them_set() {
        let rules = HealthRules::default();
        let errors = BTreeMap::from([("hw_hbm_ue_error".to_owned(), 1)]);
        let verdict = rules.judge(&Evidence {
            errors: errors.clone(),
            unreadable: None,
        });
        let clean = rules.judge(&Evidence::default());
        let group = HealthGroup {
            window: 900.0,
            devices: vec![DeviceHealth {
                neuron_device_index: 1,
                judged: Judged { verdict, errors },
                neuroncores: vec![CoreHealth {
                    neuroncore_index: 2,
                    judged: Judged {
                        verdict: clean,
                        errors: BTreeMap::new(),
                    },
                }],
            }],
        };
        let text = encode(&group, &rules, &LabelSet::default());
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(samples.len(), 3 + Reason::ALL.len() + 3, "{text}");
        let set: Vec<&str> = samples
            .iter()
            .copied()
            .filter(|l| l.ends_with(" 1"))
            .collect();
        assert_eq!(
            set,
            [
                "nds_device_health_state{neuron_device_index=\"1\",state=\"unhealthy\"} 1",
                "nds_device_health_reason{action=\"terminate\",neuron_device_index=\"1\",\
                 reason=\"hbm_uncorrectable_errors\"} 1",
                "nds_neuroncore_health_state{neuron_device_index=\"1\",neuroncore=\"2\",\
                 state=\"healthy\"} 1",
            ]
        );
        assert!(text.contains("# TYPE nds_device_health_state gauge\n"));
        assert!(encode(&HealthGroup::default(), &rules, &LabelSet::default()).is_empty());
    }
}
