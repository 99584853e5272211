//! `serve --otlp-endpoint` against a collector stand-in on loopback: an HTTP server that takes
//! OTLP/HTTP requests and decodes them with the protocol's own types. While the load generator
//! writes slabs, each request carries every family and label set `/metrics` served at the same
//! sample (the same `nds_monitor_reports_total`), gauges and counters with the same values,
//! counters cumulative and monotonic, histograms with the same buckets and count, and the
//! resource names the host and the node.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as NumberValue;
use opentelemetry_proto::tonic::metrics::v1::AggregationTemporality;
use prost::Message;

/// The requests the stand-in received, decoded, in order.
#[derive(Clone, Default)]
struct Received(Arc<(Mutex<Vec<ExportMetricsServiceRequest>>, Condvar)>);

impl Received {
    /// Waits for request `index` (0-based) and returns it.
    fn wait_for(&self, index: usize) -> ExportMetricsServiceRequest {
        let (requests, arrived) = &*self.0;
        let (requests, timeout) = arrived
            .wait_timeout_while(
                requests.lock().unwrap(),
                Duration::from_secs(60),
                |requests| requests.len() <= index,
            )
            .unwrap();
        assert!(!timeout.timed_out(), "no OTLP request {index}");
        requests[index].clone()
    }
}

/// A collector on 127.0.0.1: every POST is an OTLP/HTTP protobuf request, answered 200.
fn collector(received: Received) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let received = received.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let received = received.clone();
                        async move {
                            assert_eq!(request.uri().path(), "/v1/metrics");
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let decoded = ExportMetricsServiceRequest::decode(body).unwrap();
                            let (requests, arrived) = &*received.0;
                            requests.lock().unwrap().push(decoded);
                            arrived.notify_all();
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    address
}

/// A series: family and sorted label set.
type Key = (String, BTreeMap<String, String>);

/// A histogram series: cumulative counts per upper bound (`+Inf` last), sum, count.
type HistogramSeries = (Vec<(f64, u64)>, f64, u64);

/// What one sample shows of every series.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    numbers: BTreeMap<Key, f64>,
    /// Histograms: cumulative counts per finite bound and `+Inf`, sum, count.
    histograms: BTreeMap<Key, HistogramSeries>,
}

fn text(value: &KeyValue) -> String {
    match value.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => text.clone(),
        other => panic!("{}: {other:?}", value.key),
    }
}

fn labels(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), text(kv)))
        .collect()
}

/// One request's series, and its resource.
fn from_otlp(request: &ExportMetricsServiceRequest) -> (Seen, BTreeMap<String, String>) {
    let [resource_metrics] = request.resource_metrics.as_slice() else {
        panic!("{} resources", request.resource_metrics.len());
    };
    let resource = labels(&resource_metrics.resource.as_ref().unwrap().attributes);
    let mut seen = Seen::default();
    for metric in resource_metrics
        .scope_metrics
        .iter()
        .flat_map(|scope| &scope.metrics)
    {
        let name = metric.name.clone();
        match metric.data.as_ref().unwrap() {
            Data::Gauge(gauge) => {
                for point in &gauge.data_points {
                    let Some(NumberValue::AsDouble(value)) = point.value else {
                        panic!("{name}: {point:?}");
                    };
                    seen.numbers
                        .insert((name.clone(), labels(&point.attributes)), value);
                }
            }
            Data::Sum(sum) => {
                assert!(sum.is_monotonic, "{name}");
                assert_eq!(
                    sum.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32,
                    "{name}"
                );
                for point in &sum.data_points {
                    let Some(NumberValue::AsDouble(value)) = point.value else {
                        panic!("{name}: {point:?}");
                    };
                    seen.numbers
                        .insert((name.clone(), labels(&point.attributes)), value);
                }
            }
            Data::Histogram(histogram) => {
                assert_eq!(
                    histogram.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32,
                    "{name}"
                );
                for point in &histogram.data_points {
                    let mut bounds: Vec<f64> = point.explicit_bounds.clone();
                    bounds.push(f64::INFINITY);
                    let mut running = 0;
                    let cumulative = bounds
                        .iter()
                        .zip(&point.bucket_counts)
                        .map(|(&bound, &count)| {
                            running += count;
                            (bound, running)
                        })
                        .collect();
                    seen.histograms.insert(
                        (name.clone(), labels(&point.attributes)),
                        (cumulative, point.sum.unwrap_or(0.0), point.count),
                    );
                }
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    (seen, resource)
}

/// One exposition's series, read with prometheus-parse (not the exporter's own reader).
fn from_exposition(body: &str) -> Seen {
    let lines = body.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let histograms: BTreeSet<String> = scrape
        .samples
        .iter()
        .filter(|s| matches!(s.value, prometheus_parse::Value::Histogram(_)))
        .map(|s| s.metric.trim_end_matches("_bucket").to_owned())
        .collect();
    let mut seen = Seen::default();
    let mut sums = BTreeMap::new();
    let mut counts = BTreeMap::new();
    for sample in &scrape.samples {
        let labels: BTreeMap<String, String> = sample
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let family = sample.metric.trim_end_matches("_bucket").to_owned();
        match &sample.value {
            prometheus_parse::Value::Histogram(buckets) => {
                let cumulative = buckets
                    .iter()
                    .map(|bucket| (bucket.less_than, bucket.count as u64))
                    .collect();
                seen.histograms
                    .insert((family, labels), (cumulative, 0.0, 0));
            }
            prometheus_parse::Value::Counter(value)
            | prometheus_parse::Value::Gauge(value)
            | prometheus_parse::Value::Untyped(value) => {
                let histogram_part = |suffix| {
                    sample
                        .metric
                        .strip_suffix(suffix)
                        .filter(|base| histograms.contains(*base))
                };
                if let Some(base) = histogram_part("_sum") {
                    sums.insert((base.to_owned(), labels), *value);
                } else if let Some(base) = histogram_part("_count") {
                    counts.insert((base.to_owned(), labels), *value as u64);
                } else {
                    seen.numbers.insert((sample.metric.clone(), labels), *value);
                }
            }
            other => panic!("{}: {other:?}", sample.metric),
        }
    }
    for (key, (_, sum, count)) in &mut seen.histograms {
        *sum = sums[key];
        *count = counts[key];
    }
    seen
}

fn reports(seen: &Seen) -> Option<f64> {
    seen.numbers
        .iter()
        .find(|((name, _), _)| name == "nds_monitor_reports_total")
        .map(|(_, value)| *value)
}

#[test]
fn the_collector_receives_every_series_of_the_exposition_at_the_same_sample() {
    let scratch = Scratch::new("otlp");
    scratch.sysfs(2, 2, 7, 1);
    scratch.hardware(2, 3);
    let received = Received::default();
    let address = collector(received.clone());
    let slabs = [(0, 7301, "otlp-a"), (1, 7302, "otlp-b")];
    for &(device, pid, tag) in &slabs {
        produce(&scratch.slabs(), device, pid, tag, 20);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (dir, stop) = (scratch.slabs(), Arc::clone(&stop));
        std::thread::spawn(move || {
            // Bounded: each round loads a model, and a slab has a limited number of model
            // slots; the monitor goes on reporting what was written.
            for _ in 0..40 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                for &(device, pid, tag) in &slabs {
                    produce_more(&dir, device, pid, tag, 20);
                }
                // The producers' pace (not synchronisation).
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let served = Served::start(
        scratch
            .monitor_command("200ms")
            .env("NODE_NAME", "ip-10-0-0-7.ec2.internal")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .arg("--otlp-endpoint")
            .arg(format!("http://{address}/v1/metrics"))
            .args(["--otlp-period", "100ms"]),
    );

    // Each request is pushed right after its sample's exposition was published: the scrape
    // that follows it is of the same sample unless the next report came in between.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next = 0;
    // Requests that carried histograms so far: the match must come after a few, so that the
    // SDK's histograms have added up several periods' observations.
    let mut with_histograms = 0;
    let (otlp, exposition, resource) = loop {
        assert!(Instant::now() < deadline, "no request matched a scrape");
        let request = received.wait_for(next);
        next += 1;
        let exposition = from_exposition(&served.get("/metrics").body);
        let (otlp, resource) = from_otlp(&request);
        // A sample with the runtime series of both processes, their histograms among them.
        let full = otlp.histograms.len() >= 2;
        with_histograms += usize::from(full);
        let settled = with_histograms > 3;
        if settled && reports(&otlp).is_some() && reports(&otlp) == reports(&exposition) {
            break (otlp, exposition, resource);
        }
    };
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();

    let families = |seen: &Seen| -> BTreeSet<String> {
        seen.numbers
            .keys()
            .chain(seen.histograms.keys())
            .map(|(name, _)| name.clone())
            .collect()
    };
    assert_eq!(families(&otlp), families(&exposition));
    assert!(families(&otlp).len() > 30, "{:?}", families(&otlp));
    // Every gauge and counter: the same label sets, the same values, exactly.
    assert_eq!(otlp.numbers, exposition.numbers);
    // Every histogram: the same label sets, buckets and count; the sum to rounding.
    assert_eq!(
        otlp.histograms.keys().collect::<Vec<_>>(),
        exposition.histograms.keys().collect::<Vec<_>>()
    );
    for (key, (buckets, sum, count)) in &exposition.histograms {
        let (otlp_buckets, otlp_sum, otlp_count) = &otlp.histograms[key];
        assert_eq!((otlp_buckets, otlp_count), (buckets, count), "{key:?}");
        assert!(
            (otlp_sum - sum).abs() <= 1e-9 * sum.abs().max(1e-9),
            "{key:?}: {otlp_sum} {sum}"
        );
    }
    // Counters with values that only counting makes: the sample is a live one.
    assert!(otlp
        .numbers
        .iter()
        .any(|((name, _), value)| name == "nds_runtime_status_total" && *value > 0.0));
    assert_eq!(resource["service.name"], "nds-monitor");
    assert_eq!(resource["k8s.node.name"], "ip-10-0-0-7.ec2.internal");
    assert!(!resource["host.name"].is_empty(), "{resource:?}");
    let status = served.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}");
}
