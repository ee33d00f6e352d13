import CCurl
import CCurlShim
import DarkroomCore
import Foundation
import Synchronization

/// One HTTP transfer: an easy handle, its callbacks' state, and the continuation waiting for it.
///
/// Created on the caller's task, then owned by the multi loop's thread until it finishes: every
/// mutable field except ``cancelled`` is touched only by libcurl's callbacks on that thread, and
/// read by the caller only after the continuation has resumed (which orders the accesses).
final class CurlTransfer: @unchecked Sendable {
  let easy: UnsafeMutableRawPointer
  let url: String
  let maxBytes: Int
  let policy: DestinationPolicy
  let progress: (@Sendable (Int, Int?) -> Void)?
  private let errorBuffer: UnsafeMutablePointer<CChar>
  private var headerList: UnsafeMutablePointer<curl_slist>?

  // Written by callbacks on the loop thread.
  let body: BodyBuffer
  /// The response's header fields as they arrive.
  var fields = HeaderFields()
  var exceededLimit = false
  var forbidden: String?
  /// Whether the request carries headers of its own (a key, a token): they are never sent to
  /// another origin (scheme, host and port) on a redirect (libcurl drops only `Authorization` and
  /// `Cookie`).
  let carriesHeaders: Bool
  /// The origin of the first request as libcurl wrote its URL (`127.1` is `127.0.0.1`), taken at
  /// the guard's first check, before anything is sent; set only when ``carriesHeaders``.
  private var headerOrigin: String?
  /// Set when a redirect to another origin was refused for that reason.
  var headersWithheld: String?
  /// Bytes of header lines of the current response; past ``maxHeaderBytes`` the transfer stops.
  private var headerBytes = 0
  var headersTooLarge = false
  /// The `errno` of the last socket the open-socket callback could not open; 0 when none failed.
  var socketFailure: Int32 = 0
  private var lastProgress = ContinuousClock.now

  private let cancelFlag = Atomic<Bool>(false)
  /// How many transfers (easy handles) exist right now, for leak checks.
  static let live = Atomic<Int>(0)
  private static let lastID = Atomic<UInt64>(0)
  /// Names the transfer in the loop's cancellation list, which must not keep it alive.
  let id = CurlTransfer.lastID.add(1, ordering: .relaxed).newValue
  var continuation: CheckedContinuation<CurlOutcome, Never>?
  /// Whether the transfer waits for a connection it can multiplex on (`CURLOPT_PIPEWAIT`): set
  /// by ``CurlTransferLoops`` before it hands the transfer to a loop.
  var waitsForMultiplexing = false

  /// A request body to POST, and its content type.
  struct Upload: Sendable {
    var body: String
    var contentType: String
  }

  init?(
    url: String, options: HTTPOptions, conditional: [String: String], upload: Upload? = nil, spool: Int32 = -1,
    progress: (@Sendable (Int, Int?) -> Void)?
  ) {
    guard let easy = dr_easy_new() else {
      if spool >= 0 { AtomicFile.closeSpool(spool) }
      return nil
    }
    self.easy = easy
    self.url = url
    self.maxBytes = options.maxBytes
    self.policy = DestinationPolicy(options: options)
    self.carriesHeaders = !options.headers.isEmpty
    self.progress = progress
    body = BodyBuffer(spool: spool)
    errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
    errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    configure(options: options, conditional: conditional, upload: upload)
    CurlTransfer.live.add(1, ordering: .relaxed)
  }

  deinit {
    CurlTransfer.live.subtract(1, ordering: .relaxed)
    dr_easy_cleanup(easy)
    if let headerList { dr_slist_free_all(headerList) }
    errorBuffer.deallocate()
  }

  var isCancelled: Bool { cancelFlag.load(ordering: .relaxed) }
  func cancel() { cancelFlag.store(true, ordering: .relaxed) }

  /// The text libcurl left in the handle's error buffer.
  var errorText: String { String(cString: errorBuffer) }

  /// The receive buffer libcurl keeps per transfer: 128 KiB.
  static let receiveBufferBytes = 128 << 10

  private func configure(options: HTTPOptions, conditional: [String: String], upload: Upload?) {
    _ = dr_setopt_string(easy, CURLOPT_URL, url)
    _ = dr_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
    _ = dr_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
    _ = dr_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    _ = dr_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    _ = dr_setopt_long(easy, CURLOPT_MAXREDIRS, options.maxRedirects)
    _ = dr_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(options.timeout.milliseconds))
    _ = dr_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout.milliseconds))
    _ = dr_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
    _ = dr_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, Int(max(1, options.lowSpeedTime.milliseconds / 1000)))
    _ = dr_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxBytes))
    _ = dr_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, "")  // every encoding libcurl decodes
    _ = dr_setopt_string(easy, CURLOPT_USERAGENT, options.userAgent)
    _ = dr_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
    // Receive in pieces as large as the curl tool's (libcurl's default is 16 KB): a photo
    // arrives in a sixth of the reads and polls (Docs/Performance.md, "Issue 18").
    _ = dr_setopt_long(easy, CURLOPT_BUFFERSIZE, CurlTransfer.receiveBufferBytes)
    // CURLOPT_PIPEWAIT is set by the multi loop when the transfer starts (OriginProtocols).
    if let authorities = options.trustedCertificates { trust(authorities) }
    // No proxies from the environment: the SSRF guard checks the addresses connected to, which
    // with a proxy would be the proxy's, not the destination's.
    _ = dr_setopt_string(easy, CURLOPT_PROXY, "")
    var headers = options.headers.merging(conditional) { $1 }
    if let upload {
      // POST: libcurl copies the body now; no redirects are followed (a 3xx is the answer).
      _ = dr_setopt_long(easy, CURLOPT_POST, 1)
      _ = dr_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(upload.body.utf8.count))
      _ = dr_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, upload.body)
      _ = dr_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
      headers["Content-Type"] = upload.contentType
      headers["Expect"] = ""  // no 100-continue round trip
    }
    var list: UnsafeMutablePointer<curl_slist>?
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
      list = dr_slist_append(list, "\(name): \(value)")
    }
    headerList = list
    if let list { _ = dr_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)) }
    let user = Unmanaged.passUnretained(self).toOpaque()
    _ = dr_set_write_callback(easy, curlWrite, user)
    _ = dr_set_header_callback(easy, curlHeader, user)
    _ = dr_set_progress_callback(easy, curlProgress, user)
    _ = dr_set_opensocket_callback(easy, curlOpenSocket, user)
    // A pooled connection is reused without opening a socket: the guard looks again before every
    // request, at the address the connection has.
    _ = dr_set_prereq_callback(easy, curlBeforeRequest, user)
    // Every hop connects afresh (no pooled connection to another origin), so that the origin
    // check in the socket callback sees each one.
    if carriesHeaders { _ = dr_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1) }
  }

  /// Trusts `authorities` alone: libcurl copies the PEM (CURLOPT_CAINFO_BLOB), and its built-in CA
  /// file and directory (Debian's libcurl has both) are switched off, so that the system's store
  /// is not trusted besides. libcurl reuses a connection or TLS session only for a transfer with
  /// the same CA settings, blob included.
  func trust(_ authorities: TrustedCertificates) {
    _ = authorities.pem.withUnsafeBytes { dr_setopt_blob(easy, CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count) }
    _ = dr_setopt_string(easy, CURLOPT_CAINFO, nil)
    _ = dr_setopt_string(easy, CURLOPT_CAPATH, nil)
  }

  fileprivate func append(_ data: UnsafeRawBufferPointer) -> Bool {
    if body.count + data.count > maxBytes {
      exceededLimit = true
      return false
    }
    if body.count == 0, body.isSpooled {
      // Only a body that can be saved (2xx) goes to its unnamed file; an error page stays in
      // memory, so that a full disk never hides the status (or stops the retry) it brings.
      var status = 0
      if dr_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || !(200..<300).contains(status) {
        body.keepInMemory()
      }
    }
    if body.count == 0, let length = fields.values["content-length"].flatMap(Int.init), length > 0, length <= maxBytes {
      // Trust a declared length only so far: a hostile server could make every transfer reserve
      // maxBytes up front. Larger bodies grow as they arrive.
      body.reserve(min(length, 4 << 20))
    }
    return body.append(data)
  }

  /// The most bytes of response header lines kept for one response (libcurl's own limit for a
  /// single header is the same); a response with more fails instead of growing memory.
  static let maxHeaderBytes = 100 * 1024

  /// Takes one header line; false (stop the transfer) once the response's headers pass the limit.
  fileprivate func header(_ bytes: UnsafeRawBufferPointer) -> Bool {
    if fields.isStatusLine(bytes) { headerBytes = 0 }
    headerBytes += bytes.count
    guard headerBytes <= Self.maxHeaderBytes else {
      headersTooLarge = true
      return false
    }
    CurlTransfer.parseHeader(bytes, into: &fields)
    return true
  }

  /// One header line as libcurl hands it over: a status line starts a new response (after a
  /// redirect or a 100 Continue); `name: value` lines are kept by lower-cased name, repeated names
  /// joined with ", "; a line that starts with a space or a tab continues the field before it
  /// (an obsolete line folding: RFC 9112 has it read as one space).
  ///
  /// Taken apart on its UTF-8 bytes: Foundation's `trimmingCharacters` bridged every line to
  /// `NSString`, a tenth of the transfer thread's time on a loopback batch of 600 KB images.
  /// The line loses ASCII whitespace (space, tab, CR, LF, VT, FF) at both ends, the value the
  /// spaces and tabs before it (HTTP's optional whitespace).
  static func parseHeader(_ line: String, into fields: inout HeaderFields) {
    var line = line
    line.withUTF8 { parseHeader(UnsafeRawBufferPointer($0), into: &fields) }
  }

  /// ``parseHeader(_:into:)`` into fields by name alone (no folding across calls).
  static func parseHeader(_ line: String, into headers: inout [String: String]) {
    var fields = HeaderFields(values: headers)
    parseHeader(line, into: &fields)
    headers = fields.values
  }

  /// ``parseHeader(_:into:)`` on the line's bytes as libcurl hands them over, without making a
  /// string of the whole line first.
  static func parseHeader(_ bytes: UnsafeRawBufferPointer, into fields: inout HeaderFields) {
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
    // Only the line that opens a response is its status line: a field named `HTTP/1.1`, or a
    // folded ` HTTP/1.1 200 OK`, wipes nothing.
    if fields.isStatusLine(bytes) {
      fields.values.removeAll(keepingCapacity: true)
      fields.contentTypes.removeAll(keepingCapacity: true)
      fields.lastName = nil
      fields.awaitsStatusLine = false
      return
    }
    fields.awaitsStatusLine = false
    // A line end alone ends the response's fields (a line of spaces is a fold, which continues
    // them).
    guard !bytes.allSatisfy({ $0 == 0x0D || $0 == 0x0A }) else {
      fields.lastName = nil
      fields.awaitsStatusLine = true  // a 1xx or a redirect's fields are followed by another response
      return
    }
    let first = bytes.firstIndex { !isSpace($0) }
    let last = bytes.lastIndex { !isSpace($0) }
    if let leading = bytes.first, leading == 0x20 || leading == 0x09, let name = fields.lastName {
      guard let first, let last else { return }  // a fold of spaces adds nothing
      let more = String(decoding: bytes[first...last], as: UTF8.self)
      fields.values[name, default: ""] += " " + more
      if name == "content-type", !fields.contentTypes.isEmpty { fields.contentTypes[fields.contentTypes.count - 1] += " " + more }
      return
    }
    guard let first, let last, let colon = bytes[first...last].firstIndex(of: UInt8(ascii: ":")) else {
      fields.lastName = nil
      return
    }
    let trimmed = bytes[first...last]
    let nameBytes = trimmed[..<colon]
    // Header names are ASCII tokens: lower-cased byte by byte; anything else as Unicode does.
    let name =
      nameBytes.allSatisfy { $0 < 0x80 }
      ? String(unsafeUninitializedCapacity: nameBytes.count) { target in
        for (offset, byte) in nameBytes.enumerated() {
          target[offset] = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
        }
        return nameBytes.count
      }
      : String(decoding: nameBytes, as: UTF8.self).lowercased()
    let rest = trimmed[(colon + 1)...]
    let start = rest.firstIndex { $0 != 0x20 && $0 != 0x09 }  // the optional whitespace before a value
    let value = start.map { String(decoding: rest[$0...], as: UTF8.self) } ?? ""
    fields.values[name] = fields.values[name].map { "\($0), \(value)" } ?? value
    if name == "content-type" { fields.contentTypes.append(value) }
    fields.lastName = name
  }

  fileprivate func reportProgress(received: Int64, expected: Int64) -> Bool {
    if isCancelled { return false }
    guard let progress, received > 0 else { return true }
    let now = ContinuousClock.now
    if now - lastProgress >= .milliseconds(250) {
      lastProgress = now
      progress(Int(received), expected > 0 ? Int(expected) : nil)
    }
    return true
  }

  /// The guard's checks for a connection to `address` (nil: no address to check): a request with
  /// headers of its own stays on its first origin, and the address must be allowed. False, with
  /// the reason stored on the transfer, when the transfer must stop.
  fileprivate func mayProceed(connectedTo address: [UInt8]?) -> Bool {
    if carriesHeaders {
      let current = currentURL().map(Self.origin(of:)) ?? "an unreadable URL"
      guard let first = headerOrigin else {
        headerOrigin = current  // the first request: its URL as libcurl will send it
        return mayConnect(to: address)
      }
      if current != first {
        headersWithheld = "\(first) redirected to \(current)"
        return false
      }
    }
    return mayConnect(to: address)
  }

  /// The guard's address check (nil: no address to check).
  private func mayConnect(to address: [UInt8]?) -> Bool {
    lazy var host = currentURL().flatMap { URLComponents(string: $0)?.host }  // only when a check needs it
    if let address, let refusal = policy.refusal(address: address, host: { host }) {
      forbidden = refusal
      return false
    }
    return true
  }

  fileprivate func currentURL() -> String? {
    var pointer: UnsafePointer<CChar>?
    guard dr_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer else { return nil }
    return String(cString: pointer)
  }

  /// `scheme://host:port`, lowercased, with the scheme's default port written out; the URL's own
  /// `scheme://authority` when it has no host to read.
  static func origin(of url: String) -> String {
    OriginProtocols.origin(of: url) ?? CurlTransferLoops.originKey(url)
  }
}

/// A response's header fields as their lines arrive (``CurlTransfer/parseHeader(_:into:)``).
struct HeaderFields: Sendable {
  /// By lower-cased name; a repeated name's values joined with ", ".
  var values = [String: String](minimumCapacity: 16)
  /// Each `Content-Type` line's value, in order: where the response sends more than one, every
  /// one must pass `accept` (joined, a quote left open in one would hide the comma after it).
  var contentTypes: [String] = []
  /// The name of the field line before, which a folded line continues.
  var lastName: String?
  /// Whether the next line opens a response: at the start, and after the blank line that ends a
  /// response's fields (a 1xx, a redirect's).
  var awaitsStatusLine = true

  /// Whether `line` is a response's status line: `HTTP/` at its very start, where one is awaited.
  func isStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
    awaitsStatusLine && line.starts(with: "HTTP/".utf8)
  }
}

/// What a finished transfer reports.
struct CurlOutcome: Sendable {
  var code: CURLcode
  var status: Int
  var headers: [String: String]
  /// Each `Content-Type` line's value (``HeaderFields/contentTypes``).
  var contentTypes: [String]
  var body: ImageBytes
  var errorText: String
  var effectiveURL: String?
  var exceededLimit: Bool
  var forbidden: String?
  var cancelled: Bool
  /// Set when a redirect to another host was refused because the request carries its own headers.
  var headersWithheld: String?
  /// Whether the response's headers passed ``CurlTransfer/maxHeaderBytes`` (or libcurl's limit).
  var headersTooLarge = false
  /// Whether a connection to the server was made (a timeout before it is a connect timeout).
  var connected = true
  /// The HTTP version of the last response (`CURLINFO_HTTP_VERSION`: `CURL_HTTP_VERSION_1_1`…),
  /// 0 when none arrived.
  var httpVersion = 0
  /// The error (`errno`) that stopped writing the body into its unnamed file
  /// (``HTTPOptions/spoolDirectory``); 0 when none did.
  var spoolFailure: Int32 = 0
  /// The error (`errno`) of the last socket that could not be opened (`EMFILE` when the process
  /// is out of descriptors); 0 when none failed. libcurl reports only "could not connect".
  var socketFailure: Int32 = 0
}

extension CurlTransfer {
  /// Collects the outcome after libcurl finished (on the loop thread).
  func outcome(code: CURLcode, cancelled: Bool = false) -> CurlOutcome {
    var status = 0
    _ = dr_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
    var pointer: UnsafePointer<CChar>?
    let effective =
      dr_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK ? pointer.map { String(cString: $0) } : nil
    // libcurl refuses one header line of more than 100 KB as "out of memory" (nothing else in a
    // transfer runs it out of memory before the body).
    let oversizedHeader = code == CURLE_OUT_OF_MEMORY && headerBytes > 0 && body.count == 0
    var connectMicroseconds: curl_off_t = 0
    let connected = dr_getinfo_off(easy, CURLINFO_CONNECT_TIME_T, &connectMicroseconds) != CURLE_OK || connectMicroseconds > 0
    var httpVersion = 0
    _ = dr_getinfo_long(easy, CURLINFO_HTTP_VERSION, &httpVersion)
    return CurlOutcome(
      code: code, status: status, headers: fields.values, contentTypes: fields.contentTypes, body: body.take(),
      errorText: errorText, effectiveURL: effective,
      exceededLimit: exceededLimit, forbidden: forbidden, cancelled: cancelled || isCancelled, headersWithheld: headersWithheld,
      headersTooLarge: headersTooLarge || oversizedHeader, connected: connected, httpVersion: httpVersion,
      spoolFailure: body.spoolFailure, socketFailure: socketFailure)
  }
}

// libcurl callbacks: C function pointers; the user pointer is the unretained CurlTransfer, kept
// alive by the multi loop while the transfer runs.

private func transfer(_ user: UnsafeMutableRawPointer?) -> CurlTransfer? {
  user.map { Unmanaged<CurlTransfer>.fromOpaque($0).takeUnretainedValue() }
}

private let curlWrite: dr_data_callback = { data, size, count, user in
  guard let transfer = transfer(user), let data else { return 0 }
  let length = size * count
  return transfer.append(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let curlHeader: dr_data_callback = { data, size, count, user in
  guard let transfer = transfer(user), let data else { return 0 }
  let length = size * count
  return transfer.header(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let curlProgress: dr_progress_callback = { user, total, now, _, _ in
  guard let transfer = transfer(user) else { return 1 }
  return transfer.reportProgress(received: Int64(now), expected: Int64(total)) ? 0 : 1
}

private let curlOpenSocket: dr_opensocket_callback = { user, _, address in
  guard let transfer = transfer(user), let address else { return CURL_SOCKET_BAD }
  var bytes = [UInt8](repeating: 0, count: 16)
  let length = Int(dr_sockaddr_bytes(address, &bytes))
  guard transfer.mayProceed(connectedTo: length > 0 ? Array(bytes.prefix(length)) : nil) else { return CURL_SOCKET_BAD }
  let socket = dr_open_socket(address)
  if socket == CURL_SOCKET_BAD { transfer.socketFailure = errno }
  return socket
}

/// Before every request, new connection or reused: the same checks as ``curlOpenSocket``, on the
/// address the connection has. A connection another transfer opened (one whose allowed hosts
/// opened a non-public address, or one to another host) never carries this transfer past its own
/// guard. An address that cannot be read is refused.
private let curlBeforeRequest: dr_prereq_callback = { user, primaryIP, _, _, _ in
  guard let transfer = transfer(user) else { return Int32(CURL_PREREQFUNC_ABORT) }
  let text = primaryIP.map { String(cString: $0) } ?? ""
  let address = AddressRange.parseAddress(text)
  guard transfer.mayProceed(connectedTo: address) else { return Int32(CURL_PREREQFUNC_ABORT) }
  guard address != nil else {
    transfer.forbidden = "the address connected to (\(text.isEmpty ? "none" : text)) could not be read"
    return Int32(CURL_PREREQFUNC_ABORT)
  }
  return Int32(CURL_PREREQFUNC_OK)
}

extension Duration {
  /// Whole milliseconds.
  var milliseconds: Int64 {
    let parts = components
    return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
  }
}
