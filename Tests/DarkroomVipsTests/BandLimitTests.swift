import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Band limit")
struct BandLimitTests {
  @Test("an image declaring hundreds of bands is refused from its header (found by fuzzing: an OOM)")
  func tooManyBands() throws {
    let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("FuzzRegressions/decode/tiff-900-bands-oom.tif")
    let input = FetchedData(source: ImageSource(path: path.path), bytes: ImageBytes(try Data(contentsOf: path)))
    #expect {
      _ = try ImageDecoder().decode(input)
    } throws: { error in
      let error = error as? PipelineError
      return error?.code == .unsupportedFormat && error?.message.contains("900 bands") == true
    }
    // Ordinary band counts still decode: grey, RGB, RGBA.
    for (alpha, format) in [(false, EncodeFormat.png()), (true, .png())] {
      let decoded = try ImageDecoder().decode(try TestImages.fetched(format, width: 20, height: 10, alpha: alpha))
      let expected = alpha ? 4 : 3
      #expect(decoded.image.bands == expected)
    }
  }
}
