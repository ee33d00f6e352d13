import CCurl
import CCurlShim
import DarkroomCore
import Foundation

/// Turns a finished transfer into fetched data or a `PipelineError` with a stable code, and says
/// whether retrying could help.
struct HTTPOutcomeClassifier {
  let options: HTTPOptions
  let source: ImageSource

  enum Result {
    case success(FetchedData)
    case failure(PipelineError, retryable: Bool, retryAfter: Duration?)
  }

  func classify(_ outcome: CurlOutcome) -> Result {
    // Named only when the transfer failed: a success never shows them.
    lazy var shown = source.description
    lazy var cause = LibraryMessage(
      library: "libcurl", text: outcome.errorText.isEmpty ? curlText(outcome.code) : outcome.errorText)
    func fail(_ code: PipelineError.Code, _ message: String, retryable: Bool = false, retryAfter: Duration? = nil) -> Result {
      .failure(PipelineError(code, message, source: shown, cause: cause), retryable: retryable, retryAfter: retryAfter)
    }
    if outcome.cancelled { return fail(.cancelled, "the transfer of \(shown) was cancelled") }
    if let withheld = outcome.headersWithheld, outcome.code != CURLE_OK {
      return fail(
        .forbiddenDestination,
        "refused to follow the redirect for \(shown) (\(withheld)): the request's own headers are never sent to "
          + "another origin (scheme, host or port); fetch the redirect's target directly, or without the headers")
    }
    if let forbidden = outcome.forbidden, outcome.code != CURLE_OK {
      return fail(
        .forbiddenDestination,
        "refused to connect for \(shown): \(forbidden); allow it with \(options.allowHostsSetting) if this is intended")
    }
    if outcome.headersTooLarge {
      return fail(
        .fetchFailed,
        "the response headers are too large for \(shown): more than \(CurlTransfer.maxHeaderBytes) bytes of headers (a broken or hostile server)"
      )
    }
    if outcome.spoolFailure != 0 {
      let reason = String(cString: strerror(outcome.spoolFailure))
      return fail(
        .writeFailed,
        "cannot keep the body of \(shown) in \(options.spoolDirectory ?? "the spool directory"): \(reason) "
          + "(bodies are written there as they arrive, to be saved; free space there)")
    }
    if outcome.exceededLimit || outcome.code == CURLE_FILESIZE_EXCEEDED {
      return fail(.tooLarge, "\(shown) is larger than the limit of \(options.maxBytes) bytes (maxBytes)")
    }
    switch outcome.code {
    case CURLE_OK: return response(outcome)
    case CURLE_OPERATION_TIMEDOUT:
      let slow = cause.text.contains("too slow")
      let message =
        slow
        ? "\(shown) arrived slower than \(options.lowSpeedLimit) bytes/s for \(options.lowSpeedTime) (lowSpeedLimit, lowSpeedTime)"
        : !outcome.connected
          ? "connecting to the server of \(shown) took longer than \(options.connectTimeout) (connectTimeout): \(cause.text)"
          : "fetching \(shown) took longer than \(options.timeout) (timeout): \(cause.text)"
      return fail(.timedOut, message, retryable: true)
    case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
      return fail(.invalidInput, "\(shown) is not a URL that can be fetched: \(cause.text)")
    case CURLE_COULDNT_RESOLVE_HOST:
      return fail(.fetchFailed, "cannot resolve the host of \(shown): \(cause.text)")
    case CURLE_TOO_MANY_REDIRECTS:
      return fail(.tooManyRedirects, "\(shown) redirected more than \(options.maxRedirects) times (maxRedirects) or in a loop")
    case CURLE_COULDNT_CONNECT where outcome.socketFailure == EMFILE || outcome.socketFailure == ENFILE:
      return fail(
        .fetchFailed,
        "cannot open a connection for \(shown): \(String(cString: strerror(outcome.socketFailure))) (the process is out of "
          + "file descriptors: raise its limit, ulimit -n, or fetch fewer at once, --fetch-concurrency)",
        retryable: true)
    case CURLE_COULDNT_CONNECT:
      return fail(.fetchFailed, "cannot connect to the server of \(shown): \(cause.text)", retryable: true)
    case CURLE_PARTIAL_FILE:
      return fail(
        .fetchFailed, "the server closed the connection before the whole body of \(shown) arrived: \(cause.text)", retryable: true
      )
    case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING:
      return fail(.fetchFailed, "the connection to the server of \(shown) broke: \(cause.text)", retryable: true)
    case CURLE_PEER_FAILED_VERIFICATION:
      return fail(.fetchFailed, untrusted(cause.text))
    case CURLE_SSL_CACERT_BADFILE:
      let origin = options.trustedCertificates?.origin ?? "the system's CA store"
      return fail(.fetchFailed, "TLS failed for \(shown): OpenSSL could not load the certificates of \(origin): \(cause.text)")
    case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
      CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
      return fail(.fetchFailed, "TLS failed for \(shown): \(cause.text)")
    case CURLE_BAD_CONTENT_ENCODING:
      return fail(.fetchFailed, "the response for \(shown) has a damaged content encoding: \(cause.text)")
    default:
      return fail(.fetchFailed, "fetching \(shown) failed: \(cause.text)")
    }
  }

  /// Why the server's certificate was refused, and what would make it trusted.
  private func untrusted(_ reason: String) -> String {
    let shown = source.description
    if reason.contains("subject name") || reason.contains("does not match") {
      return "the server's certificate for \(shown) was not trusted: it is issued for another host name (\(reason))"
    }
    let authorities =
      options.trustedCertificates.map { "the authorities of \($0.origin)" } ?? "the system's certificate authorities"
    return "the server's certificate for \(shown) was not trusted: it is not signed by \(authorities) (\(reason)); "
      + "if it comes from your own authority, name that authority's certificate with caFile or caPath"
  }

  private func response(_ outcome: CurlOutcome) -> Result {
    lazy var shown = source.description
    let status = outcome.status
    if status >= 400 || (status >= 300 && status != 304) {
      var error = PipelineError(.httpStatus, "the server answered \(status) for \(shown)", source: shown)
      error.httpStatus = status
      let retryable = status >= 500 || status == 429
      return .failure(error, retryable: retryable, retryAfter: retryable ? Self.retryAfter(outcome.headers["retry-after"]) : nil)
    }
    let contentType = outcome.headers["content-type"]
    if !options.acceptedContentTypes.isEmpty, status != 304, !accepts(outcome.contentTypes) {
      return .failure(
        PipelineError(
          .unsupportedFormat,
          "the server sent \(Self.described(contentType)) for \(shown); accepted: \(options.acceptedContentTypes.joined(separator: ", "))",
          source: shown), retryable: false, retryAfter: nil)
    }
    var metadata = outcome.headers
    metadata["status"] = String(status)
    // Where no redirect was followed, the URL is the one asked for, and need not be parsed again.
    if case .url(let url) = source.location, url.absoluteString == outcome.effectiveURL {
      metadata["url"] = shown
    } else if let effective = outcome.effectiveURL {
      metadata["url"] = ImageSource(effective).description
    }
    var data = FetchedData(
      source: source, bytes: outcome.body, contentType: contentType,
      lastModified: outcome.headers["last-modified"].flatMap(HTTPDate.parse), metadata: metadata)
    data.status = status
    data.notModified = status == 304
    return .success(data)
  }

  /// Whether every media type the response names, in each of its `Content-Type` lines, is
  /// accepted: a response that repeats the field passes only when each does (`image/png` then
  /// `text/html` is not an image); none is not accepted.
  private func accepts(_ lines: [String]) -> Bool {
    !lines.isEmpty && lines.allSatisfy(accepts)
  }

  private func accepts(_ contentType: String) -> Bool {
    Self.mediaTypes(in: contentType).allSatisfy { type in
      // `type/subtype`, both tokens (RFC 9110): `image/`, `image/ jpeg` or `image/jpeg text/html`
      // name no image type.
      guard Self.isMediaType(type) else { return false }
      return options.acceptedContentTypes.contains { pattern in
        let wanted = pattern.lowercased()
        if wanted.hasSuffix("/*") { return type.hasPrefix(String(wanted.dropLast())) }
        return type == wanted
      }
    }
  }

  /// Whether `type` is `type/subtype` of two tokens (RFC 9110's `tchar`s).
  static func isMediaType(_ type: String) -> Bool {
    let parts = type.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(isTokenByte) }
  }

  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
    default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
  }

  /// The media types (lowercased, without parameters) of a `Content-Type` value, one per value
  /// where the header came more than once: commas inside a quoted parameter do not split it.
  static func mediaTypes(in value: String) -> [String] {
    var types: [String] = []
    var start = value.startIndex
    var quoted = false
    var escaped = false
    for index in value.utf8.indices {
      let byte = value.utf8[index]
      if escaped {
        escaped = false
      } else if quoted, byte == UInt8(ascii: "\\") {
        escaped = true
      } else if byte == UInt8(ascii: "\"") {
        quoted.toggle()
      } else if byte == UInt8(ascii: ","), !quoted {
        types.append(mediaType(of: value.utf8[start..<index]))
        start = value.utf8.index(after: index)
      }
    }
    types.append(mediaType(of: value.utf8[start...]))
    return types
  }

  private static func mediaType(of value: Substring.UTF8View) -> String {
    let end = value.firstIndex(of: UInt8(ascii: ";")) ?? value.endIndex
    return HTTPWhitespace.trimmed(Substring(value[..<end])).lowercased()
  }

  /// A response's content type for a message: `no content type` or `an empty content type`
  /// when there is none to show.
  static func described(_ contentType: String?) -> String {
    guard let contentType else { return "no content type" }
    let shown = HTTPWhitespace.trimmed(contentType)
    return shown.isEmpty ? "an empty content type" : shown
  }

  /// `Retry-After` as seconds (`1*DIGIT`; more than an `Int` holds is the cap) or an HTTP date,
  /// capped at 60 s.
  static func retryAfter(_ value: String?) -> Duration? {
    guard let value else { return nil }
    let text = HTTPWhitespace.trimmed(value)
    if !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
      return .seconds(min(Int(text) ?? Self.retryAfterCap, Self.retryAfterCap))
    }
    if let date = HTTPDate.parse(value) {
      return .seconds(Int(min(Double(Self.retryAfterCap), max(0, date.timeIntervalSinceNow))))
    }
    return nil
  }

  /// The longest wait a `Retry-After` can ask for, in seconds.
  static let retryAfterCap = 60

  private func curlText(_ code: CURLcode) -> String { String(cString: dr_curl_strerror(code)) }
}
