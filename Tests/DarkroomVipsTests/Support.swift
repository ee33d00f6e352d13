import Darkroom
import DarkroomTesting
import Foundation

/// Decodes encoded bytes back into an image (for checking outputs).
func decodeBack(_ image: EncodedImage) throws -> DecodedImage {
  try ImageDecoder(autoRotate: false).decode(FetchedData(source: image.source, bytes: image.bytes))
}

/// Mean absolute difference per byte of two 8-bit images of the same size and bands.
func meanDifference(_ a: VipsImage, _ b: VipsImage) throws -> Double {
  let x = try a.eightBitSRGB(keepGrey: false).pixelBytes()
  let y = try b.eightBitSRGB(keepGrey: false).pixelBytes()
  guard x.count == y.count, !x.isEmpty else { return .infinity }
  var total = 0
  for index in x.indices { total += abs(Int(x[index]) - Int(y[index])) }
  return Double(total) / Double(x.count)
}

/// The corpus folder: $DARKROOM_CORPUS or ../shared/corpus next to the package.
func corpusDirectory() -> String {
  if let configured = ProcessInfo.processInfo.environment["DARKROOM_CORPUS"], !configured.isEmpty { return configured }
  let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
  return package.deletingLastPathComponent().appendingPathComponent("shared/corpus").path
}

/// Reads a corpus file as fetched data.
func corpusFile(_ relative: String) throws -> FetchedData {
  let path = (corpusDirectory() as NSString).appendingPathComponent(relative)
  let data = try Data(contentsOf: URL(fileURLWithPath: path))
  return FetchedData(source: ImageSource(path: path), bytes: ImageBytes(data))
}

extension DecodedImage {
  /// Decoded into memory, so tests can read pixels repeatedly (a sequential image reads once).
  func materializedForTest() throws -> DecodedImage { with(try image.materialized()) }
}
