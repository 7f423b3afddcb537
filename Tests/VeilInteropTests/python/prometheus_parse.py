"""prometheus_client's side of VeilServerTests: the Prometheus text-format parser of the Python
client library Prometheus publishes, which Veil did not write.

  prometheus_parse.py   stdin: a /metrics answer; stdout: JSON {"families": [{"name", "type",
                        "documentation", "samples": [{"name", "labels", "value"}]}]}. A text the
                        parser refuses ends with status 1 and the parser's message on stderr.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    families = []
    try:
        for family in text_string_to_metric_families(text):
            samples = []
            for sample in family.samples:
                value = sample.value
                samples.append({"name": sample.name, "labels": dict(sample.labels),
                                "value": value if math.isfinite(value) else str(value)})
            families.append({"name": family.name, "type": family.type,
                             "documentation": family.documentation, "samples": samples})
    except Exception as error:  # the parser's refusal, whatever its class
        print(f"prometheus_client refused the text: {error!r}", file=sys.stderr)
        sys.exit(1)
    json.dump({"families": families}, sys.stdout)


if __name__ == "__main__":
    main()
