import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("File fetching")
struct FetcherTests {
  let folder: String

  init() throws {
    folder = NSTemporaryDirectory() + "darkroom-fetch-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder + "/root/inner", withIntermediateDirectories: true)
    try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: folder + "/root/inner/a.bin"))
    try Data(repeating: 2, count: 10).write(to: URL(fileURLWithPath: folder + "/outside.bin"))
    try FileManager.default.createSymbolicLink(atPath: folder + "/root/link.bin", withDestinationPath: folder + "/outside.bin")
  }

  func code(_ fetcher: Fetcher, _ path: String) async -> PipelineError.Code? {
    do {
      _ = try await StageHarness().run(fetcher, on: ImageSource(path))
      return nil
    } catch let error as PipelineError {
      return error.code
    } catch {
      return .stageFailed
    }
  }

  @Test func readsWithinLimits() async throws {
    let data = try await StageHarness().run(
      Fetcher(root: folder + "/root"), on: ImageSource("file://" + folder + "/root/inner/a.bin"))
    #expect(data.bytes.count == 100)
    #expect(await code(Fetcher(maxBytes: 99), folder + "/root/inner/a.bin") == .tooLarge)
    #expect(await code(Fetcher(maxBytes: 100), folder + "/root/inner/a.bin") == nil)
  }

  @Test("paths and symlinks escaping the root are refused")
  func confinement() async {
    let fetcher = Fetcher(root: folder + "/root")
    #expect(await code(fetcher, folder + "/root/../outside.bin") == .accessDenied)
    #expect(await code(fetcher, folder + "/root/link.bin") == .accessDenied)
    #expect(await code(fetcher, folder + "/root/missing.bin") == .notFound)
    #expect(await code(fetcher, folder + "/root/inner") == .invalidInput)
    // Two roots: the narrower one wins.
    #expect(await code(Fetcher(roots: [folder, folder + "/root/inner"]), folder + "/outside.bin") == .accessDenied)
  }

  @Test("a FIFO is refused at once instead of blocking a thread")
  func fifo() async {
    let path = folder + "/pipe"
    #expect(mkfifo(path, 0o600) == 0)
    #expect(await code(Fetcher(), path) == .invalidInput)
  }

  @Test("other schemes say what is supported")
  func schemes() async {
    do {
      _ = try await StageHarness().run(Fetcher(), on: ImageSource("ftp://example.com/a.jpg"))
      Issue.record("fetched ftp")
    } catch let error as PipelineError {
      #expect(error.code == .invalidInput)
      #expect(error.message.contains("the scheme \"ftp\" is not supported"))
    } catch {
      Issue.record("\(error)")
    }
  }
}

@Suite("Network helpers")
struct NetworkHelperTests {
  @Test("address ranges parse, contain and format")
  func ranges() throws {
    let loopback = try #require(AddressRange("127.0.0.0/8"))
    #expect(loopback.contains([127, 1, 2, 3]))
    #expect(!loopback.contains([128, 0, 0, 1]))
    let mapped = try #require(AddressRange.parseAddress("::ffff:10.1.2.3"))
    #expect(AddressRange.nonPublic.contains { $0.contains(mapped) })
    #expect(AddressRange.format(try #require(AddressRange.parseAddress("::1"))) == "::1")
    #expect(AddressRange.format(try #require(AddressRange.parseAddress("2001:db8::8:1"))) == "2001:db8::8:1")
    #expect(AddressRange("10.0.0.0/33") == nil)
    #expect(AddressRange("1.2.3") == nil)
    #expect(!AddressRange.nonPublic.contains { $0.contains([93, 184, 216, 34]) })
  }

  @Test("a range's prefix length is plain decimal, and an IPv4-mapped range is the IPv4 range it maps")
  func writtenRanges() throws {
    for refused in [
      "127.0.0.1/", "127.0.0.1/08", "127.0.0.1/+8", "127.0.0.1/-0", "127.0.0.1/ 8", "127.0.0.1/8 ", "::1/", "::1/0128",
      "10.0.0.0/8/8", "/8", "127.0.0.1/٨", "127.0.0.1/1000",
    ] {
      #expect(AddressRange(refused) == nil, "\(refused) is refused")
    }
    #expect(AddressRange("127.0.0.1/0")?.prefixLength == 0)
    #expect(AddressRange("10.0.0.0/8")?.prefixLength == 8)
    #expect(AddressRange("::/128")?.prefixLength == 128)
    let single = try #require(AddressRange("::ffff:127.0.0.1/128"))
    #expect(single.contains([127, 0, 0, 1]))
    #expect(!single.contains([127, 0, 0, 2]))
    #expect(single.description == "127.0.0.1/32")
    let mappedRange = try #require(AddressRange("::ffff:10.0.0.0/104"))
    #expect(mappedRange.contains([10, 9, 8, 7]))
    #expect(mappedRange.contains(try #require(AddressRange.parseAddress("::ffff:10.1.1.1"))))
    #expect(!mappedRange.contains([11, 0, 0, 1]))
    // A range wider than the mapped block stays IPv6 and opens no IPv4 address.
    #expect(!(try #require(AddressRange("::ffff:10.0.0.0/80"))).contains([10, 0, 0, 1]))
  }

  @Test("every IPv6 form that embeds an IPv4 address is non-public unless it is the mapped one of a public address")
  func embeddedIPv4() throws {
    func nonPublic(_ text: String) throws -> Bool {
      let address = try #require(AddressRange.parseAddress(text), "\(text) parses")
      return AddressRange.nonPublic.contains { $0.contains(address) }
    }
    for v4 in ["127.0.0.1", "10.1.2.3", "169.254.169.254", "93.184.216.34", "8.8.8.8", "0.0.0.1"] {
      #expect(try nonPublic("::\(v4)"), "IPv4-compatible ::\(v4)")
      #expect(try nonPublic("::ffff:0:\(v4)"), "IPv4-translated ::ffff:0:\(v4)")
      #expect(try nonPublic("64:ff9b::\(v4)"), "NAT64 64:ff9b::\(v4)")
    }
    // The mapped form is the IPv4 address itself: private is refused, public is not.
    #expect(try nonPublic("::ffff:127.0.0.1"))
    #expect(try !nonPublic("::ffff:93.184.216.34"))
    #expect(try !nonPublic("2606:2800:220:1:248:1893:25c8:1946"))
  }

  @Test("HTTP dates round-trip and parse the obsolete forms")
  func httpDates() {
    let date = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")
    #expect(date?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT")?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994")?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 1_709_251_199)) == "Thu, 29 Feb 2024 23:59:59 GMT")
    #expect(HTTPDate.parse("yesterday") == nil)
    // Found by fuzzing: a 15-digit year overflowed the seconds count and trapped.
    #expect(HTTPDate.parse("Sun, 22 Nov 244444444444026 10:00:00 GMT") == nil)
    #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT")?.timeIntervalSince1970 == 253_402_300_799)
    // HTTP's optional whitespace (spaces, tabs) around a value is not part of it; a Unicode
    // space is not HTTP's whitespace.
    #expect(HTTPDate.parse(" \tSun, 06 Nov 1994 08:49:37 GMT\t ")?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT\u{00A0}") == nil)
  }

  @Test("HTTP whitespace is trimmed on the bytes: spaces and tabs at both ends, nothing else")
  func httpWhitespace() {
    #expect(HTTPWhitespace.trimmed(" \t image/jpeg ; q=1\t ") == "image/jpeg ; q=1")
    #expect(HTTPWhitespace.trimmed("image/jpeg") == "image/jpeg")
    #expect(HTTPWhitespace.trimmed(" \t \t") == "")
    #expect(HTTPWhitespace.trimmed("") == "")
    #expect(HTTPWhitespace.trimmed("\u{00A0}é \u{3000}") == "\u{00A0}é \u{3000}")
    #expect(HTTPWhitespace.trimmed("\r\nx\r\n") == "\r\nx\r\n")
    let line = "a; charset=utf-8 "
    #expect(HTTPWhitespace.trimmed(line.split(separator: ";")[1]) == "charset=utf-8")
  }

  @Test("freshness follows Cache-Control, then Expires")
  func freshness() {
    let now = Date(timeIntervalSince1970: 1_000_000)
    #expect(Freshness(headers: ["cache-control": "public, max-age=600"], now: now) == .lifetime(.seconds(600)))
    #expect(Freshness(headers: ["cache-control": "no-store, max-age=600"], now: now) == .noStore)
    #expect(Freshness(headers: ["cache-control": "no-cache"], now: now) == .lifetime(.zero))
    let expires = HTTPDate.format(now.addingTimeInterval(120))
    #expect(Freshness(headers: ["expires": expires, "date": HTTPDate.format(now)], now: now) == .lifetime(.seconds(120)))
    #expect(Freshness(headers: ["expires": "garbage"], now: now) == .lifetime(.zero))
    #expect(Freshness(headers: [:], now: now) == .unspecified)
  }

  @Test(
    "an invalid max-age makes a response stale whatever Expires says; one too large to count is 2^31 seconds",
    arguments: [
      "max-age=-99999999999999", "max-age=-1", "max-age=+600", "max-age=6e2", "max-age", "s-maxage=abc, max-age=600",
      "max-age=0, max-age=31536000", "max-age=600, MAX-AGE=600",
    ])
  func invalidMaxAge(_ cacheControl: String) {
    let now = Date(timeIntervalSince1970: 1_000_000)
    let farExpires = HTTPDate.format(now.addingTimeInterval(86_400 * 365))
    #expect(Freshness(headers: ["cache-control": cacheControl, "expires": farExpires], now: now) == .lifetime(.zero))
  }

  @Test("a max-age too large to count is capped at 2^31 seconds (RFC 9111 1.2.2)")
  func hugeMaxAge() {
    let huge = "max-age=" + String(repeating: "9", count: 100)
    #expect(Freshness(headers: ["cache-control": huge]) == .lifetime(.seconds(2_147_483_648)))
    #expect(Freshness(headers: ["cache-control": "max-age=2147483649"]) == .lifetime(.seconds(2_147_483_648)))
  }

  @Test("data: URLs decode, within maxBytes")
  func dataURLs() async throws {
    let fetched = try await StageHarness().run(Fetcher(), on: ImageSource("data:image/png;base64,iVBORw0KGgo="))
    #expect(Array(fetched.bytes.data) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    #expect(fetched.contentType == "image/png")
    await #expect(throws: PipelineError.self) {
      try await StageHarness().run(Fetcher(maxBytes: 4), on: ImageSource("data:;base64,iVBORw0KGgo="))
    }
    let forbidden = Fetcher(allowedSchemes: ["http", "https"])
    do {
      _ = try await StageHarness().run(forbidden, on: ImageSource("/etc/hostname"))
      Issue.record("file allowed")
    } catch let error as PipelineError {
      #expect(error.code == .forbiddenDestination)
    }
  }
}
