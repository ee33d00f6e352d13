import CCurl
import CCurlShim
import DarkroomCore
import Foundation

/// Darkroom's handling of an HTTP response, from raw bytes as a server would send them, without a
/// network: the status line and headers through the same parsing as a transfer's header callback,
/// then the classification into fetched data or a ``PipelineError``, then what the response says
/// about caching. For fuzzing and tests (`darkroom-fuzz http`).
package enum ResponseInterpretation {
  /// Interprets `raw` (`HTTP/1.1 200 OK\r\nName: value\r\n…\r\n\r\nbody`) as the answer for
  /// `source` under `options`.
  public static func interpret(
    _ raw: [UInt8], source: ImageSource = ImageSource("http://example.com/image.jpg"), options: HTTPOptions = HTTPOptions()
  ) -> Result<FetchedData, PipelineError> {
    let separator: [UInt8] = [13, 10, 13, 10]
    var split = raw.count
    if raw.count >= 4 {
      for index in 0...(raw.count - 4) where raw[index..<(index + 4)].elementsEqual(separator) {
        split = index
        break
      }
    }
    let head = String(decoding: raw[..<split], as: UTF8.self)
    let body = split + 4 <= raw.count ? Array(raw[(split + 4)...]) : []
    var fields = HeaderFields()
    var status = 0
    for line in head.split(separator: "\r\n", omittingEmptySubsequences: false) {
      var text = String(line)
      // A status line where the parser takes one (not a field named `HTTP/1.1`).
      if text.withUTF8({ fields.isStatusLine(UnsafeRawBufferPointer($0)) }) {
        let parts = line.split(separator: " ", maxSplits: 2)
        status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
      }
      CurlTransfer.parseHeader(text, into: &fields)
    }
    let outcome = CurlOutcome(
      code: CURLE_OK, status: status, headers: fields.values, contentTypes: fields.contentTypes, body: ImageBytes(body),
      errorText: "", effectiveURL: nil,
      exceededLimit: body.count > options.maxBytes, forbidden: nil, cancelled: false)
    switch HTTPOutcomeClassifier(options: options, source: source).classify(outcome) {
    case .success(let data):
      // What a cache checkpoint would read from it.
      _ = data.freshness(now: Date())
      _ = CacheValidators(data)
      _ = ImageFormat.sniff(Array(body.prefix(64)))
      _ = ImageFormat.declaredHEIFSize(data.bytes)
      _ = ImageFormat.jpegFrameMarker(data.bytes)
      return .success(data)
    case .failure(let error, _, _):
      return .failure(error)
    }
  }
}
