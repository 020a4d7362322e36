"""The connection form in the real Airflow UI, in a real browser: Schema and Port are hidden for
`iceberg_lake` (Airflow 3 reads `hidden-fields` from the provider info), the relabelled fields and
the extra fields are shown. A screenshot is kept under test-output/."""

from __future__ import annotations

import re


def _choose_type(page, label: str):
    page.get_by_role("combobox").first.click()
    page.keyboard.type(label)
    page.wait_for_timeout(500)
    page.keyboard.press("Enter")
    page.get_by_text("Standard Fields").wait_for()


def _standard_labels(page) -> str:
    return page.get_by_role("dialog").inner_text()


def test_the_iceberg_lake_form_hides_schema_and_port_and_shows_the_catalog_fields(airflow, page, output_dir):
    from browser import log_in

    log_in(page, airflow)
    page.goto(f"{airflow.base_url}/connections")
    page.get_by_role("button", name=re.compile("Add Connection", re.I)).click()

    # Control: the Generic type hides nothing, so the check below would see Schema and Port were they shown.
    _choose_type(page, "Generic")
    text = _standard_labels(page)
    assert re.search(r"^Schema$", text, re.M) and re.search(r"^Port$", text, re.M), text

    _choose_type(page, "Iceberg Lake")
    page.get_by_text("Catalog URI").wait_for()
    text = _standard_labels(page)
    assert not re.search(r"^(Schema|Port)$", text, re.M), text
    assert "Catalog URI" in text and "User / OAuth client id" in text and "Password / token" in text
    page.get_by_text("Extra Fields", exact=True).click()
    page.get_by_text("Catalog kind").wait_for()
    text = _standard_labels(page)
    assert "Warehouse" in text and "Iceberg runtime provided" in text
    page.get_by_role("dialog").screenshot(path=str(output_dir / "iceberg-lake-connection-form.png"))
