@0xb5c2f4e9a1d37c60;

# Seed 000's RPC echo as a Cap'n Proto interface: the seed's `.rep` declared a slot
# sendRawData(QByteArray) and a signal dataEchoed(QByteArray); here the call returns the
# bytes it was given, which is both.
interface Echo {
  sendRawData @0 (data :Data) -> (data :Data);
}
