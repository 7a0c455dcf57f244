// Render a prompt's answer form from its JSON Schema:
// enum → buttons, boolean → Yes/No, string → text box, number → number box,
// object → a small form of those; no schema → text box.

let counter = 0;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function choiceButtons(values, labels, submit) {
  const group = el("div", { class: "parley-choices", role: "group" });
  values.forEach((value, i) => {
    const button = el("button", { type: "button", class: "parley-choice", text: labels[i] });
    button.addEventListener("click", () => submit(value));
    group.append(button);
  });
  return group;
}

function field(name, schema, required) {
  const id = `parley-field-${++counter}`;
  const label = el("label", { for: id, text: schema.title || name });
  let input;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id, name });
    for (const value of schema.enum) input.append(el("option", { value: String(value), text: String(value) }));
  } else if (schema.type === "boolean") {
    input = el("input", { id, name, type: "checkbox" });
    return { node: el("div", { class: "parley-field parley-check" }, input, label), read: () => input.checked };
  } else if (schema.type === "number" || schema.type === "integer") {
    input = el("input", { id, name, type: "number", step: schema.type === "integer" ? "1" : "any" });
  } else {
    input = el("input", { id, name, type: schema.format === "email" ? "email" : "text", autocomplete: "off" });
    if (schema.maxLength) input.setAttribute("maxlength", String(schema.maxLength));
  }
  if (required) input.required = true;
  const read = () => {
    if (schema.type === "number") return input.value === "" ? undefined : Number(input.value);
    if (schema.type === "integer") return input.value === "" ? undefined : parseInt(input.value, 10);
    if (Array.isArray(schema.enum)) return schema.enum[input.selectedIndex];
    return input.value;
  };
  return { node: el("div", { class: "parley-field" }, label, input), read };
}

/**
 * @param {object|null} schema  the hook's JSON Schema
 * @param {string} question  the prompt text (used as the label of a lone text box)
 * @param {(payload: any) => void} submit
 * @returns {HTMLElement}
 */
export function renderForm(schema, question, submit) {
  schema = schema || { type: "string" };
  if (Array.isArray(schema.enum)) {
    return choiceButtons(schema.enum, schema.enum.map(String), submit);
  }
  if (schema.type === "boolean") {
    return choiceButtons([true, false], ["Yes", "No"], submit);
  }
  const form = el("form", { class: "parley-form", novalidate: "" });
  let read;
  if (schema.type === "object" && schema.properties) {
    const required = new Set(schema.required || []);
    const fields = Object.entries(schema.properties).map(([name, sub]) => [name, field(name, sub, required.has(name))]);
    for (const [, f] of fields) form.append(f.node);
    read = () => {
      const out = {};
      for (const [name, f] of fields) {
        const value = f.read();
        if (value !== undefined && !(value === "" && !required.has(name))) out[name] = value;
      }
      return out;
    };
  } else {
    const f = field("answer", { ...schema, title: schema.title || question || "Your answer" }, true);
    form.append(f.node);
    read = f.read;
  }
  form.append(el("button", { type: "submit", class: "parley-submit", text: "Send answer" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    submit(read());
  });
  return form;
}
