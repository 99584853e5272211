//! The generated messages of PodResources v1, with the client
//! (`pod_resources_lister_client`, `client` feature) and the server
//! (`pod_resources_lister_server`, `server` feature) of `v1.PodResourcesLister`.

// Generated code: its items carry the .proto's comments, not all of them.
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/v1.rs"));
