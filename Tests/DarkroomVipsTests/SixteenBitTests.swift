import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

@Suite("16-bit sources")
struct SixteenBitTests {
  @Test("a transparent 16-bit PNG flattens onto the background colour and pads with it")
  func sixteenBitBackground() throws {
    let fetched = try corpusFile("pngsuite/basn6a16.png")  // 16-bit RGBA with transparent areas
    let decoded = try ImageDecoder().decode(fetched).materializedForTest()
    let white = try decodeBack(try ImageEncoder(.jpeg(), background: [255, 255, 255]).encode(decoded)).materializedForTest()
    let black = try decodeBack(try ImageEncoder(.jpeg(), background: [0, 0, 0]).encode(decoded)).materializedForTest()
    // Where the source is transparent, the two outputs differ by the background.
    var differs = false
    for y in stride(from: 0, to: 32, by: 4) {
      for x in stride(from: 0, to: 32, by: 4) {
        let a = try white.image.pixel(x: x, y: y)
        let b = try black.image.pixel(x: x, y: y)
        if zip(a, b).contains(where: { abs(Int($0) - Int($1)) > 100 }) { differs = true }
      }
    }
    #expect(differs, "the background colour had no effect on a 16-bit image")
    let padded = try Resizer(width: 64, height: 64, mode: .center, background: [255, 255, 255, 255]).resize(decoded)
    let corner = try padded.image.eightBitSRGB().pixel(x: 0, y: 0)
    #expect(colour(corner, isNear: [255, 255, 255], tolerance: 2), "\(corner)")
  }
}
