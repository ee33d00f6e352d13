import Foundation

/// Decodes `data:` URLs (RFC 2397) for the ``Fetcher``: `data:image/png;base64,iVBOR…`.
///
/// The payload counts against `maxBytes` before it is decoded (base64 text is a third larger than
/// its bytes, so the check is conservative).
package struct DataTransport: FetchTransport {
  public let schemes: Set<String> = ["data"]

  public init() {}

  public func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    guard case .url(let url) = source.location else {
      throw PipelineError(.invalidInput, "\(source) is not a data: URL", source: source.description)
    }
    return try DataTransport.decode(url.absoluteString, source: source, maxBytes: limits.maxBytes)
  }

  static func decode(_ text: String, source: ImageSource, maxBytes: Int) throws -> FetchedData {
    let shown = "data:…"
    guard let comma = text.firstIndex(of: ","), text.lowercased().hasPrefix("data:") else {
      throw PipelineError(.invalidInput, "a data: URL needs a comma before its payload", source: shown)
    }
    let header = text[text.index(text.startIndex, offsetBy: 5)..<comma]
    let payload = text[text.index(after: comma)...]
    let parameters = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
    let isBase64 = parameters.last?.lowercased() == "base64"
    let mediaType = parameters.first.flatMap { $0.contains("/") ? $0 : nil }
    let estimated = isBase64 ? payload.utf8.count / 4 * 3 : payload.utf8.count
    if estimated > maxBytes {
      throw PipelineError(
        .tooLarge, "the data: URL holds about \(estimated) bytes, over the limit of \(maxBytes) bytes (maxBytes)", source: shown)
    }
    let bytes: Data?
    if isBase64 {
      bytes = Data(base64Encoded: String(payload).removingPercentEncoding ?? String(payload), options: .ignoreUnknownCharacters)
    } else {
      bytes = (String(payload).removingPercentEncoding).map { Data($0.utf8) }
    }
    guard let bytes else {
      throw PipelineError(.invalidInput, "the data: URL's payload is not valid base64 or percent-encoding", source: shown)
    }
    if bytes.count > maxBytes {
      throw PipelineError(
        .tooLarge, "the data: URL holds \(bytes.count) bytes, over the limit of \(maxBytes) bytes (maxBytes)", source: shown)
    }
    return FetchedData(source: source, bytes: ImageBytes(bytes), contentType: mediaType, metadata: ["size": String(bytes.count)])
  }
}
