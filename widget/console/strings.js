// The strings the shared form code (schema-form.js) asks for, in English: passed as its
// `t` argument, so the console and the answer page work with the widget's i18n'd version.
const STRINGS = {
  yes: "Yes", no: "No", sendAnswer: "Send answer", yourAnswer: "Your answer", wholeNumber: "Enter a whole number.",
};

export function t(key) {
  return STRINGS[key] ?? key;
}
