/// What the connection handler has to do to answer one request: a ``TestResponse`` with its
/// sequences, header wrappers and conditions resolved for that request.
enum ResponsePlan {
  /// A complete response with `Content-Length: body.count`.
  case fixed(status: Int, headers: [(String, String)], body: [UInt8])
  /// A `200` response whose body is sent without `Content-Length`.
  case unsized(headers: [(String, String)], body: [UInt8])
  /// Wait until `count` requests for the path are held (at most `within`), then answer with `response`.
  case gathered(count: Int, within: Duration, response: TestResponse, extraHeaders: [(String, String)])
  /// Wait, then answer with `response` (resolved after the wait, keeping `extraHeaders`).
  case delayed(delay: Duration, response: TestResponse, extraHeaders: [(String, String)])
  /// A `200` response whose body is sent `chunkSize` bytes every `interval`.
  case trickle(headers: [(String, String)], body: [UInt8], chunkSize: Int, interval: Duration)
  /// A `200` response announcing `declaredLength` bytes, sending `body`, then closing.
  case truncated(headers: [(String, String)], body: [UInt8], declaredLength: Int)
  /// A `200` response announcing `body.count` bytes, sending `after` of them, then resetting.
  case reset(headers: [(String, String)], body: [UInt8], after: Int)
  /// A `200` response streaming `byteCount` pattern bytes.
  case generated(headers: [(String, String)], byteCount: Int, withContentLength: Bool)

  /// Resolves `response` for a request.
  ///
  /// - Parameters:
  ///   - response: The route's behaviour.
  ///   - index: The zero-based number of this request among the requests for the same path.
  ///   - requestHeaders: The request headers, keyed by lower-cased name.
  ///   - extraHeaders: Headers from enclosing ``TestResponse/headers(_:_:)`` cases; they override
  ///     same-named headers of the resolved response.
  static func resolve(
    _ response: TestResponse, index: Int, requestHeaders: [String: String], extraHeaders: [(String, String)] = []
  ) -> ResponsePlan {
    switch response {
    case .ok(let body, let contentType, let headers):
      let base = merge([("Content-Type", contentType)], headers)
      return .fixed(status: 200, headers: merge(base, extraHeaders), body: body)

    case .status(let status, let body, let headers):
      return .fixed(status: status, headers: merge(headers, extraHeaders), body: body)

    case .redirect(let location, let status):
      return .fixed(status: status, headers: merge([("Location", location)], extraHeaders), body: [])

    case .gathered(let count, let within, let then):
      return .gathered(count: count, within: within, response: then, extraHeaders: extraHeaders)

    case .slowHeaders(let delay, let then):
      return .delayed(delay: delay, response: then, extraHeaders: extraHeaders)

    case .trickle(let body, let chunkSize, let interval, let contentType):
      return .trickle(
        headers: merge([("Content-Type", contentType)], extraHeaders), body: body, chunkSize: max(1, chunkSize),
        interval: interval)

    case .truncated(let body, let declaredLength):
      let declared = max(0, declaredLength)
      return .truncated(
        headers: merge([("Content-Type", octetStream)], extraHeaders), body: Array(body.prefix(declared)),
        declaredLength: declared)

    case .resetMidBody(let body, let after):
      return .reset(
        headers: merge([("Content-Type", octetStream)], extraHeaders), body: body,
        after: min(max(0, after), body.count))

    case .noContentLength(let body, let contentType):
      return .unsized(headers: merge([("Content-Type", contentType)], extraHeaders), body: body)

    case .generated(let byteCount, let withContentLength):
      return .generated(
        headers: merge([("Content-Type", octetStream)], extraHeaders), byteCount: max(0, byteCount),
        withContentLength: withContentLength)

    case .gzip(let body, let contentType):
      let headers = [("Content-Type", contentType), ("Content-Encoding", "gzip")]
      return .fixed(status: 200, headers: merge(headers, extraHeaders), body: StoredGzip.encode(body))

    case .conditional(let body, let contentType, let etag, let lastModified, let maxAge):
      let quotedETag = etag.map(quoted)
      var validators: [(String, String)] = []
      if let quotedETag { validators.append(("ETag", quotedETag)) }
      if let lastModified { validators.append(("Last-Modified", lastModified)) }
      if let maxAge { validators.append(("Cache-Control", "max-age=\(maxAge)")) }
      let notModified: Bool
      if let ifNoneMatch = requestHeaders["if-none-match"] {
        notModified = quotedETag.map { etagListMatches(ifNoneMatch, $0) } ?? false
      } else if let ifModifiedSince = requestHeaders["if-modified-since"], let lastModified {
        notModified = ifModifiedSince.trimmed == lastModified.trimmed
      } else {
        notModified = false
      }
      if notModified {
        return .fixed(status: 304, headers: merge(validators, extraHeaders), body: [])
      }
      let headers = [("Content-Type", contentType)] + validators
      return .fixed(status: 200, headers: merge(headers, extraHeaders), body: body)

    case .sequence(let responses):
      guard let last = responses.last else {
        return .fixed(
          status: 500, headers: merge([("Content-Type", "text/plain")], extraHeaders),
          body: Array("empty TestResponse.sequence".utf8))
      }
      let chosen = index < responses.count ? responses[max(0, index)] : last
      return resolve(chosen, index: index, requestHeaders: requestHeaders, extraHeaders: extraHeaders)

    case .headers(let inner, let headers):
      return resolve(inner, index: index, requestHeaders: requestHeaders, extraHeaders: merge(headers, extraHeaders))

    case .byRequestHeader(let name, let choices, let otherwise):
      let chosen = requestHeaders[name].flatMap { choices[$0] } ?? otherwise
      return resolve(chosen, index: index, requestHeaders: requestHeaders, extraHeaders: extraHeaders)
    }
  }

  private static let octetStream = "application/octet-stream"

  /// `base` without the headers named in `overrides` (case-insensitively), followed by `overrides`.
  static func merge(_ base: [(String, String)], _ overrides: [(String, String)]) -> [(String, String)] {
    guard !overrides.isEmpty else { return base }
    let overridden = Set(overrides.map { $0.0.lowercased() })
    return base.filter { !overridden.contains($0.0.lowercased()) } + overrides
  }

  /// `etag` as an entity-tag: unchanged when already quoted (strong or weak), quoted otherwise.
  private static func quoted(_ etag: String) -> String {
    etag.hasPrefix("\"") || etag.hasPrefix("W/\"") ? etag : "\"\(etag)\""
  }

  /// Whether an `If-None-Match` value lists `etag`, using the weak comparison of RFC 9110 §8.8.3.2.
  private static func etagListMatches(_ ifNoneMatch: String, _ etag: String) -> Bool {
    let wanted = weakOpaqueTag(etag)
    return ifNoneMatch.split(separator: ",").contains { candidate in
      let candidate = String(candidate).trimmed
      return candidate == "*" || weakOpaqueTag(candidate) == wanted
    }
  }

  private static func weakOpaqueTag(_ tag: String) -> String {
    tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
  }
}

extension String {
  /// The string without leading and trailing spaces and tabs.
  fileprivate var trimmed: String {
    let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
    guard let start = firstIndex(where: { !isBlank($0) }), let end = lastIndex(where: { !isBlank($0) }) else {
      return ""
    }
    return String(self[start...end])
  }
}
