//! The table of APIs (`api::APIS`), ApiVersions and the dispatch agree: ApiVersions lists
//! exactly the table's APIs with their ranges, every version of every API in the table is
//! answered with a response of the table's type, and the table counts a response's error
//! codes for the connection's server.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::api::{self, APIS, AnsweredBy, table_codec};
use super::tests::response;
use super::{Server, ServerHandle};
use crate::metrics::server::{ServerStats, count_error};

fn start() -> ServerHandle {
    let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
    Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap()
}

/// A frame (size prefix included) of `key` v`version` with correlation id `corr`.
pub(crate) fn frame(key: ApiKey, version: i16, corr: i32, body: &[u8]) -> Vec<u8> {
    let mut msg = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("table")))
        .encode(&mut msg, key.request_header_version(version))
        .unwrap();
    msg.extend_from_slice(body);
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// Reads one response to `key` v`version`: its correlation id and body.
fn read(s: &mut TcpStream, key: ApiKey, version: i16) -> (i32, Bytes) {
    let mut b = Bytes::from(response(s));
    let header = ResponseHeader::decode(&mut b, key.response_header_version(version)).unwrap();
    (header.correlation_id, b)
}

#[test]
fn api_versions_lists_exactly_the_tables_apis() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(&frame(
        ApiKey::ApiVersions,
        3,
        1,
        &table_codec::default_request(ApiKey::ApiVersions, 3),
    ))
    .unwrap();
    let (corr, mut body) = read(&mut s, ApiKey::ApiVersions, 3);
    assert_eq!(corr, 1);
    let r = ApiVersionsResponse::decode(&mut body, 3).unwrap();
    assert_eq!(r.error_code, 0);
    let listed: Vec<(i16, i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    let table: Vec<(i16, i16, i16)> = APIS.iter().map(|a| (a.key as i16, a.min, a.max)).collect();
    assert_eq!(listed, table);
    for api in APIS {
        let valid = api.key.valid_versions();
        // Below the protocol crate's versions only the old ones kept in `legacy`.
        let oldest = api::legacy::OLDEST
            .iter()
            .find(|(k, _)| *k == api.key)
            .map_or(valid.min, |(_, v)| *v);
        // Above them only WriteTxnMarkers v2 (KIP-890), read by its own codec.
        let newest = if api.key == ApiKey::WriteTxnMarkers {
            crate::cluster::txn_markers_wire::TRANSACTION_VERSION_SINCE
        } else {
            valid.max
        };
        assert!(
            oldest <= api.min && api.min <= api.max && api.max <= newest,
            "{:?} {}..={} is outside the protocol's {valid:?}",
            api.key,
            api.min,
            api.max
        );
        assert_eq!(
            api::supported_range(api.key as i16),
            Some((api.min, api.max))
        );
    }
    let mut keys: Vec<i16> = APIS.iter().map(|a| a.key as i16).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), APIS.len(), "an API listed twice");
}

#[test]
fn every_version_of_every_api_in_the_table_is_answered() {
    let server = start();
    let mut corr = 100;
    for api in APIS {
        for version in api.min..=api.max {
            corr += 1;
            let mut s = TcpStream::connect(server.local_addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let body = table_codec::default_request(api.key, version);
            s.write_all(&frame(api.key, version, corr, &body)).unwrap();
            // An ApiVersions after it shows that the connection is still served (a
            // default Produce has acks = 0 and gets no response).
            let probe = table_codec::default_request(ApiKey::ApiVersions, 0);
            if api.answered_by == AnsweredBy::Handler {
                s.write_all(&frame(ApiKey::ApiVersions, 0, -1, &probe))
                    .unwrap();
            }
            let (got, body) = read(&mut s, api.key, version);
            if got == -1 && api.key == ApiKey::Produce {
                continue;
            }
            assert_eq!(got, corr, "{:?} v{version}", api.key);
            table_codec::decodes(api.key, version, body)
                .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", api.key));
            if api.answered_by == AnsweredBy::Handler {
                let (got, mut rest) = read(&mut s, ApiKey::ApiVersions, 0);
                assert_eq!(got, -1, "{:?} v{version}: the connection went on", api.key);
                assert_eq!(rest.get_i16(), 0);
            }
        }
    }
}

#[test]
fn response_errors_count_per_partition_for_this_threads_server() {
    use kafka_protocol::messages::ProduceResponse;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    let stats = Arc::new(ServerStats::default());
    let response = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default().with_partition_responses(vec![
            PartitionProduceResponse::default().with_error_code(3),
            PartitionProduceResponse::default(),
            PartitionProduceResponse::default().with_error_code(3),
        ]),
    ]);
    // Not counted outside a connection.
    api::count_errors(&response);
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    {
        let mut conn = stats.connection(peer);
        let timer = conn.request(&[0, 0, 0, 8, 0, 0, 0, 1, 0xff, 0xff]);
        api::count_errors(&response);
        count_error(56);
        drop(timer);
        let m = ServerStats::sum(std::slice::from_ref(&stats)).unwrap();
        assert_eq!(m.connections_open, 1);
        assert_eq!(m.requests.len(), 1);
        assert_eq!(m.requests[0].api, "Produce");
        assert_eq!(m.requests[0].latency.count, 1);
        let errors: Vec<(i16, u64)> = m.errors.iter().map(|e| (e.code, e.count)).collect();
        assert_eq!(errors, [(3, 2), (56, 1)]);
    }
    let m = ServerStats::sum(std::slice::from_ref(&stats)).unwrap();
    assert_eq!((m.connections_open, m.connections_accepted), (0, 1));
    // The connection is over: nothing more is counted on this thread.
    count_error(3);
    let m = ServerStats::sum(&[stats]).unwrap();
    assert_eq!(m.errors[0].count, 2);
}

#[test]
fn a_version_out_of_range_is_refused_naming_the_api_version_and_client() {
    let (_, hi) = api::supported_range(ApiKey::OffsetCommit as i16).unwrap();
    let request = frame(ApiKey::OffsetCommit, hi + 1, 7, &[]);
    let Err(api::Fatal(msg)) = super::connection::parse(request[4..].to_vec()) else {
        panic!("OffsetCommit v{} was accepted", hi + 1);
    };
    let expected = format!("OffsetCommit v{} is not supported", hi + 1);
    assert!(msg.contains(&expected), "{msg}");
    assert!(msg.contains("client id \"table\""), "{msg}");
}
