import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

@testable import DarkroomCurl

/// Parallel transfers to one origin: HTTP/1.1 gets a connection each, HTTP/2 shares one. The
/// server holds each request until all six are there (`gathered`), so the test needs no clock:
/// transfers that waited for each other would each sit out the server's limit and be counted.
@Suite("Parallel transfers per origin", .serialized)
struct ParallelTransferTests {
  static let parallel = 6
  let gathered = TestResponse.gathered(count: parallel, within: .seconds(10), then: .ok(body: Array("ok".utf8)))

  func fetchAll(_ url: String, options: HTTPOptions) async -> [Result<FetchedData, PipelineError>] {
    let transport = HTTPTransport(options: options)
    return await withTaskGroup(of: Result<FetchedData, PipelineError>.self) { group in
      for index in 0..<Self.parallel {
        group.addTask {
          do {
            return .success(try await transport.fetch(ImageSource(url + "?n=\(index)")))
          } catch let error as PipelineError {
            return .failure(error)
          } catch {
            return .failure(PipelineError(.stageFailed, "\(error)"))
          }
        }
      }
      return await group.reduce(into: []) { $0.append($1) }
    }
  }

  @Test("six parallel downloads from a plain HTTP/1.1 host run on six connections at once")
  func plainHTTP1() async throws {
    let server = try await TestHTTPServer.start(routes: ["/slow": gathered])
    defer { Task { try? await server.shutdown() } }
    var options = HTTPOptions()
    options.allowHosts = ["127.0.0.1"]
    let results = await fetchAll(server.url("/slow"), options: options)
    #expect(results.allSatisfy { $0.failure == nil })
    #expect(server.peakGathered("/slow") == Self.parallel)
    #expect(server.peakOpenConnections == Self.parallel)
  }

  @Test("six parallel downloads from an HTTPS host offering only HTTP/1.1 run on six connections, first contact included")
  func tlsHTTP1() async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let server = try await tls.server(routes: ["/slow": gathered], protocols: ["http/1.1"])
    defer { Task { try? await server.shutdown() } }
    let options = tls.options(trusting: try TrustedCertificates.file(tls.path("ca.pem"), roots: []))
    let results = await fetchAll(server.url("/slow"), options: options)
    #expect(results.allSatisfy { $0.failure == nil })
    #expect(server.peakGathered("/slow") == Self.parallel)
    #expect(server.peakOpenConnections == Self.parallel)
    #expect(Set(server.requests.map(\.httpVersion)) == ["HTTP/1.1"])
  }

  @Test("six parallel downloads from an HTTP/2 host share one connection")
  func http2SharesOneConnection() async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let server = try await tls.server(routes: ["/slow": gathered])
    defer { Task { try? await server.shutdown() } }
    let options = tls.options(trusting: try TrustedCertificates.file(tls.path("ca.pem"), roots: []))
    let results = await fetchAll(server.url("/slow"), options: options)
    #expect(results.allSatisfy { $0.failure == nil })
    #expect(server.peakGathered("/slow") == Self.parallel)
    #expect(server.connectionCount == 1)
    #expect(Set(server.requests.map(\.httpVersion)) == ["HTTP/2"])
  }

  @Test("what is remembered per origin: plain HTTP never waits, HTTPS waits unless known HTTP/1.x, memory bounded")
  func originMemory() {
    // CURLINFO_HTTP_VERSION: 2 is CURL_HTTP_VERSION_1_1, 3 is CURL_HTTP_VERSION_2_0.
    var origins = OriginProtocols()
    let waits1 = origins.waitsForMultiplexing("http://a.example/x")
    #expect(!waits1)
    let waits2 = origins.waitsForMultiplexing("https://a.example/x")
    #expect(waits2)
    origins.record("https://a.example/y", httpVersion: 2)
    let waits3 = origins.waitsForMultiplexing("https://A.example:443/z")
    #expect(!waits3)
    let waits4 = origins.waitsForMultiplexing("https://a.example:8443/z")
    #expect(waits4)
    origins.record("https://a.example/y", httpVersion: 3)
    let waits5 = origins.waitsForMultiplexing("https://a.example/z")
    #expect(waits5)
    origins.record("https://b.example/", httpVersion: 0)
    origins.record("http://c.example/", httpVersion: 2)  // plain HTTP never waits: not kept
    #expect(origins.count == 1)
    origins.record("HTTPS://D.example/", httpVersion: 2)
    let waits7 = origins.waitsForMultiplexing("hTTps://d.EXAMPLE:443/")
    #expect(!waits7 && origins.count == 2)
    for index in 0..<(OriginProtocols.capacity * 3) {
      origins.record("https://host\(index).example/", httpVersion: 2)
      #expect(origins.count <= OriginProtocols.capacity)
    }
    // The most recently used are kept.
    let waits6 = origins.waitsForMultiplexing("https://host\(OriginProtocols.capacity * 3 - 1).example/")
    #expect(!waits6)
  }
}
